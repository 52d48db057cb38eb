"""Datasets: readers for the public formats and the synthetic BiasWorld.

:class:`BiasWorldDataModule` is imported on first use (module ``__getattr__``), so that readers
and :mod:`vlbias.data.images` can be imported without Lightning.
"""

import importlib

from vlbias.data.biasworld import BiasWorld, Item

_LAZY = {"BiasWorldDataModule": "vlbias.data.datamodule"}  # name -> module that defines it

__all__ = ["BiasWorld", "BiasWorldDataModule", "Item"]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

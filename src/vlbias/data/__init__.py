"""Datasets: readers for the public formats and the synthetic BiasWorld.

The LightningDataModules (:class:`BiasWorldDataModule`, :class:`CaptionDataModule`) and the caption
corpus reader (which imports Hugging Face ``datasets``) are imported on first use (module
``__getattr__``), so that the other readers and :mod:`vlbias.data.images` import without Lightning.
"""

import importlib

from vlbias.data.biasworld import BiasWorld, Item

_LAZY = {  # name -> module that defines it
    "BiasWorldDataModule": "vlbias.data.datamodule",
    "CaptionDataModule": "vlbias.data.caption_datamodule",
    "CaptionSplit": "vlbias.data.captions",
    "RetrievalSplit": "vlbias.data.captions",
    "read_captions": "vlbias.data.captions",
}

__all__ = [
    "BiasWorld",
    "BiasWorldDataModule",
    "CaptionDataModule",
    "CaptionSplit",
    "Item",
    "RetrievalSplit",
    "read_captions",
]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Measurement suites: one per paper family.

The names below are imported on first use (module ``__getattr__``), so that the torch-free parts
(:mod:`vlbias.suites.registry`, :mod:`vlbias.suites.options`) import without torch.
"""

import importlib

_LAZY = {  # name -> module that defines it
    "Suite": "vlbias.suites.base",
    "SuiteOutput": "vlbias.suites.base",
    "list_suites": "vlbias.suites.registry",
    "suite_class": "vlbias.suites.registry",
}

__all__ = ["Suite", "SuiteOutput", "list_suites", "suite_class"]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

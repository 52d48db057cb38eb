"""Model adapters: one protocol (:mod:`vlbias.models.base`) over every VLM family.

The names below are imported on first use (module ``__getattr__``), so that the torch-free catalog
(:mod:`vlbias.models.catalog`: the names and capabilities ``vlbias models`` lists) imports without torch.
"""

import importlib

_LAZY = {  # name -> module that defines it
    "Capability": "vlbias.models.base",
    "ModelAdapter": "vlbias.models.base",
    "require_capability": "vlbias.models.base",
    "measuring": "vlbias.models.inference",
    "word_log_probs": "vlbias.models.masked_words",
    "describe_models": "vlbias.models.catalog",
    "list_models": "vlbias.models.catalog",
    "models_with": "vlbias.models.catalog",
    "load": "vlbias.models.registry",
}

__all__ = [
    "Capability",
    "ModelAdapter",
    "describe_models",
    "list_models",
    "load",
    "measuring",
    "models_with",
    "require_capability",
    "word_log_probs",
]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

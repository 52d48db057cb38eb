"""The table of registered model names and the adapter class behind each name.

Each adapter module is imported only when its name is asked for (by its ``"module:Class"``
string), so listing models or loading CLIP does not import ALBEF's dependencies. This module
imports nothing of :mod:`vlbias.models`, so :mod:`vlbias.models.base` can name the
models that have a capability when it refuses one, and :mod:`vlbias.models.registry` (which
builds models) depends on both.
"""

from __future__ import annotations

from vlbias.lazy_table import LazyTable

# name -> "module:Class"; one line per adapter.
_ADAPTERS = LazyTable(
    "model",
    {
        "clip": "vlbias.models.clip:CLIPAdapter",
        "albef": "vlbias.models.albef:ALBEFAdapter",
        "bert": "vlbias.models.bert:BertAdapter",
        "blip": "vlbias.models.blip:BLIPAdapter",
        "vilt": "vlbias.models.vilt:ViLTAdapter",
        "flava": "vlbias.models.flava:FLAVAAdapter",
        "visualbert": "vlbias.models.visualbert:VisualBERTAdapter",
        "lxmert": "vlbias.models.lxmert:LXMERTAdapter",
        "sentence_bert": "vlbias.models.sentence:SentenceBertAdapter",
        "pruned": "vlbias.models.pruned:PrunedEmbeddings",
    },
)


def list_models() -> list[str]:
    """Registered model names, sorted."""
    return _ADAPTERS.names()


def adapter_class(name: str) -> type:
    """The adapter class (a :class:`~vlbias.models.base.ModelAdapter` subclass) registered as ``name``."""
    return _ADAPTERS.get(name)


def models_with(capability: str) -> list[str]:
    """Names of the registered models that declare ``capability`` (a
    :class:`~vlbias.models.base.Capability`, which is a ``str`` enum, or its value)."""
    return [name for name in list_models() if capability in adapter_class(name).capabilities]

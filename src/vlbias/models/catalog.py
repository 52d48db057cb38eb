"""The table of registered model names, the adapter class behind each name, and each one's capabilities.

Each adapter module is imported only when its name is asked for (by its ``"module:Class"``
string), so listing models or loading CLIP does not import ALBEF's dependencies, and listing the
models and their capabilities (``vlbias models``) imports no torch. This module imports nothing of
:mod:`vlbias.models`, so :mod:`vlbias.models.base` can name the models that have a capability when
it refuses one, and :mod:`vlbias.models.registry` (which builds models) depends on both.
"""

from __future__ import annotations

from vlbias.lazy_table import LazyTable

# name -> "module:Class"; one line per adapter.
_ADAPTERS = LazyTable(
    "model",
    {
        "clip": "vlbias.models.families.clip:CLIPAdapter",
        "albef": "vlbias.models.families.albef:ALBEFAdapter",
        "bert": "vlbias.models.families.bert:BertAdapter",
        "blip": "vlbias.models.families.blip:BLIPAdapter",
        "vilt": "vlbias.models.families.vilt:ViLTAdapter",
        "flava": "vlbias.models.families.flava:FLAVAAdapter",
        "visualbert": "vlbias.models.families.visualbert:VisualBERTAdapter",
        "lxmert": "vlbias.models.families.lxmert:LXMERTAdapter",
        "sentence_bert": "vlbias.models.families.sentence:SentenceBertAdapter",
        "open_clip": "vlbias.models.families.open_clip:OpenCLIPAdapter",
        "siglip": "vlbias.models.families.siglip:SigLIPAdapter",
        "siglip2": "vlbias.models.families.siglip2:SigLIP2Adapter",
        "pruned": "vlbias.models.families.pruned:PrunedEmbeddings",
        "debiased": "vlbias.mitigation.debiased_embeddings:DebiasedEmbeddings",
        "prompt_array": "vlbias.models.families.prompt_array:PromptArrayCLIP",
        "llava": "vlbias.models.families.chat_vlm:LlavaAdapter",
        "qwen2_vl": "vlbias.models.families.chat_vlm:Qwen2VLAdapter",
        "qwen2_5_vl": "vlbias.models.families.chat_vlm:Qwen25VLAdapter",
        "paligemma": "vlbias.models.families.chat_vlm:PaliGemmaAdapter",
        "gemma3": "vlbias.models.families.chat_vlm:Gemma3Adapter",
        "idefics3": "vlbias.models.families.chat_vlm:Idefics3Adapter",
        "smolvlm": "vlbias.models.families.chat_vlm:SmolVLMAdapter",
        "internvl": "vlbias.models.families.chat_vlm:InternVLAdapter",
    },
)

# name -> its capabilities' values, declared here only, so that listing them imports no adapter; each adapter class
# reads its own (``capabilities = registered_capabilities(name)``, :func:`vlbias.models.base.registered_capabilities`).
_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "clip": ("embed",),
    "albef": ("embed", "fill_mask", "match", "token_states"),
    "bert": ("fill_mask", "token_states"),
    "blip": ("embed", "match"),
    "vilt": ("fill_mask", "match", "token_states"),
    "flava": ("embed", "fill_mask", "match", "token_states"),
    "visualbert": ("fill_mask", "match", "token_states"),
    "lxmert": ("fill_mask", "match", "token_states"),
    "sentence_bert": ("token_states",),
    "open_clip": ("embed", "match"),
    "siglip": ("embed", "match"),
    "siglip2": ("embed", "match"),
    "pruned": ("embed",),
    "debiased": ("embed",),
    "prompt_array": ("embed",),
    "llava": ("answer",),
    "qwen2_vl": ("answer",),
    "qwen2_5_vl": ("answer",),
    "paligemma": ("answer",),
    "gemma3": ("answer",),
    "idefics3": ("answer",),
    "smolvlm": ("answer",),
    "internvl": ("answer",),
}


def list_models() -> list[str]:
    """Registered model names, sorted."""
    return _ADAPTERS.names()


def adapter_class(name: str) -> type:
    """The adapter class (a :class:`~vlbias.models.base.ModelAdapter` subclass) registered as ``name``."""
    return _ADAPTERS.get(name)


def model_capabilities(name: str) -> list[str]:
    """The capability values of model ``name``, sorted, without importing its adapter."""
    if name not in _CAPABILITIES:
        _ADAPTERS.get(name)  # refuses the unknown name with the known ones
    return sorted(_CAPABILITIES[name])


def describe_models() -> list[dict[str, object]]:
    """``[{"name": ..., "capabilities": [...]}, ...]`` for ``vlbias models --json``.

    Example:
        >>> describe_models()[0]
        {'name': 'albef', 'capabilities': ['embed', 'fill_mask', 'match', 'token_states']}
    """
    return [{"name": name, "capabilities": model_capabilities(name)} for name in list_models()]


def models_with(capability: str) -> list[str]:
    """Names of the registered models that declare ``capability`` (a
    :class:`~vlbias.models.base.Capability`, which is a ``str`` enum, or its value)."""
    return [name for name in list_models() if str(getattr(capability, "value", capability)) in _CAPABILITIES[name]]

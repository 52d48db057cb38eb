"""Model adapters: one protocol (:mod:`vlbias.models.base`) over every VLM family."""

from vlbias.models.base import Capability, ModelAdapter, require_capability
from vlbias.models.inference import measuring
from vlbias.models.masked_words import word_log_probs
from vlbias.models.registry import describe_models, list_models, load, models_with

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

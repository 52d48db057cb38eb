"""Chat-debiaser names -> classes (:class:`vlbias.mitigation.chat_debiaser.ChatDebiaser`), one line per method; a
method's module is imported only when its class is asked for, so listing them imports no torch.

A catalog of its own, beside :mod:`vlbias.mitigation.registry` (the embedding debiasers): ``vlbias debias`` offers
every name of that registry (``--method all`` is :func:`~vlbias.mitigation.registry.list_debiasers`) and fits it on
an EMBED model's embeddings; a chat method listed there would be offered before the command can fit a chat model.
A command that compares chat methods reads this table (:func:`list_chat_debiasers`) and fits each through
:func:`vlbias.mitigation.chat_debiaser.fit_chat_debiaser`.
"""

from __future__ import annotations

from vlbias.lazy_table import LazyTable

_CHAT_DEBIASERS = LazyTable(
    "chat debiaser",
    {
        "activation_steering": "vlbias.mitigation.activation_steering:ActivationSteering",
        "contextual_calibration": "vlbias.mitigation.contextual_calibration:ContextualCalibration",
        "instruction_prefix": "vlbias.mitigation.instruction_prefix:InstructionPrefix",
    },
)


def list_chat_debiasers() -> list[str]:
    """Registered chat-debiaser names, sorted."""
    return _CHAT_DEBIASERS.names()


def chat_debiaser_class(name: str) -> type:
    """The chat-debiaser class (a :class:`~vlbias.mitigation.chat_debiaser.ChatDebiaser`) registered as ``name``."""
    return _CHAT_DEBIASERS.get(name)

"""Debiaser names -> debiaser classes (:class:`vlbias.mitigation.debiaser.Debiaser`), one line per method; a
method's module is imported only when its class is asked for."""

from __future__ import annotations

from vlbias.lazy_table import LazyTable

_DEBIASERS = LazyTable(
    "debiaser",
    {
        "orth_proj": "vlbias.mitigation.orth_proj:OrthProj",
        "orth_cal": "vlbias.mitigation.orth_cal:OrthCal",
        "prism_mini": "vlbias.mitigation.prism_mini:PrismMini",
        "clip_clip": "vlbias.mitigation.clip_clip:CLIPClip",
        "mmbias_pruning": "vlbias.mitigation.mmbias_pruning:MMBiasPruning",
    },
)


def list_debiasers() -> list[str]:
    """Registered debiaser names, sorted."""
    return _DEBIASERS.names()


def debiaser_class(name: str) -> type:
    """The debiaser class (a :class:`~vlbias.mitigation.debiaser.Debiaser` subclass) registered as ``name``."""
    return _DEBIASERS.get(name)

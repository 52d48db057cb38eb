"""Debiaser names -> debiaser classes (:class:`vlbias.mitigation.debiaser.Debiaser`), one line per method; a
method's module is imported only when its class is asked for."""

from __future__ import annotations

from vlbias.lazy_table import LazyTable

_DEBIASERS = LazyTable(
    "debiaser",
    {
        "bend_vlm": "vlbias.mitigation.bend_vlm:BendVLM",
        "clip_clip": "vlbias.mitigation.clip_clip:CLIPClip",
        "mmbias_pruning": "vlbias.mitigation.mmbias_pruning:MMBiasPruning",
        "orth_cal": "vlbias.mitigation.orth_cal:OrthCal",
        "orth_proj": "vlbias.mitigation.orth_proj:OrthProj",
        "prism_mini": "vlbias.mitigation.prism_mini:PrismMini",
        "roboshot": "vlbias.mitigation.roboshot:RoboShot",
        "sfid": "vlbias.mitigation.sfid:SFID",
    },
)


def list_debiasers() -> list[str]:
    """Registered debiaser names, sorted."""
    return _DEBIASERS.names()


def debiaser_class(name: str) -> type:
    """The debiaser class (a :class:`~vlbias.mitigation.debiaser.Debiaser` subclass) registered as ``name``."""
    return _DEBIASERS.get(name)

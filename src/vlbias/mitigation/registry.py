"""Debiaser names -> debiaser classes (:class:`vlbias.mitigation.debiaser.Debiaser`), one line per method; a
method's module is imported only when its class is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vlbias.lazy_table import LazyTable

if TYPE_CHECKING:
    from vlbias.mitigation.debiaser import Debiaser

_DEBIASERS = LazyTable(
    "debiaser",
    {
        "bend_vlm": "vlbias.mitigation.bend_vlm:BendVLM",
        "orth_proj": "vlbias.mitigation.orth_proj:OrthProj",
        "roboshot": "vlbias.mitigation.roboshot:RoboShot",
        "sfid": "vlbias.mitigation.sfid:SFID",
    },
)


def list_debiasers() -> list[str]:
    """Registered debiaser names, sorted."""
    return _DEBIASERS.names()


def debiaser_class(name: str) -> type[Debiaser]:
    """The debiaser class registered as ``name``."""
    return _DEBIASERS.get(name)

"""Suite names -> suite classes (their options are declared in :mod:`vlbias.suites.options`). Imports no torch:
a suite's module is imported only when its class is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vlbias.lazy_table import LazyTable

if TYPE_CHECKING:
    from vlbias.suites.base import Suite

# name -> "module:Class"; one line per suite.
_SUITES = LazyTable(
    "suite",
    {
        "mmbias": "vlbias.suites.mmbias:MMBiasSuite",
        "counterbias": "vlbias.suites.counterbias:CounterBiasSuite",
        "vlstereoset": "vlbias.suites.vlstereoset:VLStereoSetSuite",
        "weat": "vlbias.suites.weat:WEATSuite",
        "entity_association": "vlbias.suites.entity_association:EntityAssociationSuite",
        "retrieval_bias": "vlbias.suites.retrieval_bias:RetrievalBiasSuite",
        "zero_shot_fairness": "vlbias.suites.zero_shot_fairness:ZeroShotFairnessSuite",
        "gallery_skew": "vlbias.suites.gallery_skew:GallerySkewSuite",
    },
)


def list_suites() -> list[str]:
    """Registered suite names, sorted."""
    return _SUITES.names()


def suite_class(name: str) -> type[Suite]:
    """The suite class registered as ``name``."""
    return _SUITES.get(name)

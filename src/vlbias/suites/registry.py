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
        "bias_qa": "vlbias.suites.bias_qa:BiasQASuite",
        "counterfactual_answers": "vlbias.suites.counterfactual_answers:CounterfactualAnswersSuite",
        "open_generation": "vlbias.suites.open_generation:OpenGenerationSuite",
    },
)

# name -> what it measures, in one line (``vlbias measure --help``; ``tests/test_command_help.py`` holds the names
# equal to the registry's), so that listing them imports no suite.
_SUMMARIES = {
    "mmbias": "MMBias association tests (Eq. 1) and zero-shot rankings of an EMBED model",
    "counterbias": "CounterBias: bias of a FILL_MASK model that reads pixels, from counterfactual images and texts",
    "vlstereoset": "VLStereoSet scores (vlrs, vlbs, ivlas per category, lmss, vlss)",
    "weat": "SEAT and Grounded-WEAT/SEAT effect sizes",
    "entity_association": "association scores S_PT, S_L, S_V and bias scores B(E) of a FILL_MASK model",
    "retrieval_bias": "ranking bias of what an EMBED model retrieves for gender-neutral queries",
    "zero_shot_fairness": "group fairness of CLIP-style zero-shot classification",
    "gallery_skew": "skew of what text queries retrieve from an attribute-labelled image gallery",
    "bias_qa": "BBQ bias scores of a chat model's answers to multiple-choice questions about images",
    "counterfactual_answers": "how a chat model's answer to one question changes across images of different people",
    "open_generation": "warmth, competence, sentiment or toxicity of a chat model's descriptions of different people",
}


def list_suites() -> list[str]:
    """Registered suite names, sorted."""
    return _SUITES.names()


def suite_class(name: str) -> type[Suite]:
    """The suite class registered as ``name``."""
    return _SUITES.get(name)


def suite_summaries() -> dict[str, str]:
    """Each registered suite, sorted by name, with what it measures in one line (imports no suite)."""
    return {name: _SUMMARIES[name] for name in list_suites()}

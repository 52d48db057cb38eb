"""Bias metrics as ``torchmetrics.Metric`` classes; their formulas are in ``vlbias.metrics.functional``."""

import vlbias.metrics._torchvision  # noqa: F401  (before torchmetrics, which imports torchvision)
from vlbias.metrics.bbq import BBQScores
from vlbias.metrics.counterbias import CounterBiasScore, CounterBiasUncertainty
from vlbias.metrics.counterfactual import CounterfactualAnswers
from vlbias.metrics.counterfactual_protocols import CounterfactualProtocols
from vlbias.metrics.entity_association import (
    BiasScore,
    LanguageAssociation,
    LanguageBiasInterval,
    PretrainingAssociation,
    VisualAssociation,
    VisualBiasInterval,
)
from vlbias.metrics.grounded_weat import GroundedCongruenceTest
from vlbias.metrics.group_fairness import GroupFairness
from vlbias.metrics.group_scores import GroupScores
from vlbias.metrics.position import PositionPreference
from vlbias.metrics.precision import PrecisionAtK
from vlbias.metrics.ranking_bias import RankingBias
from vlbias.metrics.retrieval import RetrievalRecall
from vlbias.metrics.vlstereoset import VLStereoSetScores, VLStereoSetShift
from vlbias.metrics.weat import ITMEffectSize, ITMTest, WEATEffectSize, WEATTest
from vlbias.metrics.zero_shot import CosineZeroShotRanking, ZeroShotRanking

__all__ = [
    "BBQScores",
    "BiasScore",
    "CosineZeroShotRanking",
    "CounterBiasScore",
    "CounterBiasUncertainty",
    "CounterfactualAnswers",
    "CounterfactualProtocols",
    "GroundedCongruenceTest",
    "GroupFairness",
    "GroupScores",
    "ITMEffectSize",
    "ITMTest",
    "LanguageAssociation",
    "LanguageBiasInterval",
    "PositionPreference",
    "PretrainingAssociation",
    "PrecisionAtK",
    "RankingBias",
    "RetrievalRecall",
    "VLStereoSetScores",
    "VLStereoSetShift",
    "VisualAssociation",
    "VisualBiasInterval",
    "WEATEffectSize",
    "WEATTest",
    "ZeroShotRanking",
]

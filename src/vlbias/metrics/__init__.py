"""Bias metrics as ``torchmetrics.Metric`` classes; their formulas are in ``vlbias.metrics.functional``."""

from vlbias.metrics.counterbias import CounterBiasScore, CounterBiasUncertainty
from vlbias.metrics.entity_association import LanguageAssociation, VisualAssociation
from vlbias.metrics.grounded_weat import GroundedCongruenceTest
from vlbias.metrics.vlstereoset import VLStereoSetScores, VLStereoSetShift
from vlbias.metrics.weat import ITMEffectSize, ITMTest, WEATEffectSize, WEATTest
from vlbias.metrics.zero_shot import ZeroShotRanking

__all__ = [
    "CounterBiasScore",
    "CounterBiasUncertainty",
    "GroundedCongruenceTest",
    "ITMEffectSize",
    "ITMTest",
    "LanguageAssociation",
    "VLStereoSetScores",
    "VLStereoSetShift",
    "VisualAssociation",
    "WEATEffectSize",
    "WEATTest",
    "ZeroShotRanking",
]

"""Bias metrics as ``torchmetrics.Metric`` classes; their formulas are in ``vlbias.metrics.functional``."""

from vlbias.metrics.weat import ITMEffectSize, ITMTest, WEATEffectSize, WEATTest

__all__ = ["ITMEffectSize", "ITMTest", "WEATEffectSize", "WEATTest"]

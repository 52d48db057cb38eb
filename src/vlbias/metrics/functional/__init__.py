"""Functional metrics: the formulas, on tensors, with no state (the classes in ``vlbias.metrics`` wrap them)."""

from vlbias.metrics.functional.multiple_testing import benjamini_hochberg, holm_bonferroni
from vlbias.metrics.functional.weat import (
    effect_size_from_associations,
    interval_from_associations,
    itm_association,
    itm_effect_size,
    mean_difference_from_associations,
    p_value_from_associations,
    statistic_from_associations,
    weat_association,
    weat_effect_size,
    weat_effect_size_interval,
    weat_p_value,
    weat_test_statistic,
)

__all__ = [
    "benjamini_hochberg",
    "effect_size_from_associations",
    "holm_bonferroni",
    "interval_from_associations",
    "itm_association",
    "itm_effect_size",
    "mean_difference_from_associations",
    "p_value_from_associations",
    "statistic_from_associations",
    "weat_association",
    "weat_effect_size",
    "weat_effect_size_interval",
    "weat_p_value",
    "weat_test_statistic",
]

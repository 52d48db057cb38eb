"""The Pareto front of (bias, accuracy) points: lower ``|bias|`` and higher accuracy are better; and which column of a
comparison of debiasing methods is its bias axis (:func:`headline_bias`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def pareto_front(bias: Sequence[float], accuracy: Sequence[float]) -> list[bool]:
    """Whether each point is Pareto-optimal: no other point has ``|bias|`` no larger and accuracy no smaller,
    with one of the two strictly better. Points with a NaN coordinate are never on the front.

    Example:
        >>> pareto_front([0.1, 0.5, -0.2, 0.3], [0.6, 0.9, 0.8, 0.7])
        [True, True, True, False]
    """
    if len(bias) != len(accuracy):
        raise ValueError(f"Expected `bias` and `accuracy` of one length but got {len(bias)} and {len(accuracy)}")
    points = [(abs(b), a) for b, a in zip(bias, accuracy, strict=True)]
    finite = [math.isfinite(b) and math.isfinite(a) for b, a in points]
    front = []
    for i, (b, a) in enumerate(points):
        dominated = any(
            finite[j] and bj <= b and aj >= a and (bj < b or aj > a) for j, (bj, aj) in enumerate(points) if j != i
        )
        front.append(finite[i] and not dominated)
    return front


def headline_bias(columns: Iterable[str], accuracy: str = "zero_shot_accuracy") -> str:
    """The bias column of a comparison of debiasing methods (``compare.csv``'s ``columns``) that its figure shows:
    the first effect size (MMBias's cross-modal :math:`d` when the ``mmbias`` suite ran), else the first metric;
    ``method``, ``not_fitted``, ``accuracy`` and the interval ends are not metrics.

    Example:
        >>> headline_bias(["method", "weat/p_value", "mmbias/x/effect_size", "mmbias/x/effect_size/ci_low"])
        'mmbias/x/effect_size'
    """
    metrics = [
        column
        for column in columns
        if column not in ("method", "not_fitted", accuracy) and not column.endswith(("/ci_low", "/ci_high"))
    ]
    effect_sizes = [column for column in metrics if column.endswith("effect_size")]
    return (effect_sizes or metrics)[0]

"""The Pareto front of (bias, accuracy) points: lower ``|bias|`` and higher accuracy are better."""

from __future__ import annotations

import math
from collections.abc import Sequence


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

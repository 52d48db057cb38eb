r"""Empirical coverage of the effect size's bootstrap intervals, percentile versus BCa
(``scripts/bootstrap_coverage.py``).

Each simulated dataset draws association scores of ``n`` targets per set, :math:`s(x) \sim N(\delta, 1)` and
:math:`s(y) \sim N(0, 1)`, and computes both intervals of :func:`~vlbias.metrics.functional.weat.
interval_from_associations` from the same replicates (same seed). The effect size divides by the standard
deviation of the pooled scores, whose population value for equal sizes is that of the mixture,
:math:`\sqrt{1 + \delta^2 / 4}`, so the population effect size is :math:`\theta = \delta / \sqrt{1 + \delta^2/4}`;
for a chosen :math:`\theta`, :math:`\delta = \theta / \sqrt{1 - \theta^2 / 4}`. Coverage is the share of datasets
whose interval holds :math:`\theta`, with its Monte-Carlo standard error :math:`\sqrt{p(1-p)/D}` over :math:`D`
datasets.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch

from vlbias.metrics.functional import interval_from_associations
from vlbias.options import DEFAULT_STATISTICS


def mean_shift(theta: float) -> float:
    """The shift delta of X's scores whose population effect size is theta (module docstring).

    Example:
        >>> round(mean_shift(1.0), 4)
        1.1547
    """
    return theta / math.sqrt(1 - theta**2 / 4)


def coverage(
    size: int, theta: float, datasets: int, n_bootstrap: int, confidence: float, seed: int
) -> dict[str, float]:
    """Share of ``datasets`` simulated datasets of ``size`` targets per set whose interval holds ``theta``, per
    method (``percentile``, ``bca``)."""
    generator = torch.Generator().manual_seed(seed)
    shift = mean_shift(theta)
    hits = {"percentile": 0, "bca": 0}
    for dataset in range(datasets):
        s_x = torch.randn(size, generator=generator, dtype=torch.float64) + shift
        s_y = torch.randn(size, generator=generator, dtype=torch.float64)
        for method in hits:
            low, high = interval_from_associations(
                s_x, s_y, n_bootstrap=n_bootstrap, confidence=confidence, seed=dataset, method=method
            ).tolist()
            hits[method] += low <= theta <= high
    return {method: count / datasets for method, count in hits.items()}


def bootstrap_coverage(
    sizes: Sequence[int] = (8, 12, 25, 64),
    effect_sizes: Sequence[float] = (0.5, 1.0),
    datasets: int = 1500,
    n_bootstrap: int = 2000,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
) -> None:
    """Print the coverage of both intervals for each population effect size and set size.

    Args:
        sizes: Targets per set.
        effect_sizes: Population theta.
        datasets: Simulated datasets per (size, theta).
        n_bootstrap: Bootstrap replicates per interval.
        confidence: The intervals' nominal confidence.
        seed: Seed of the simulated scores.
    """
    print(
        f"datasets per row: {datasets}, bootstrap replicates: {n_bootstrap}, "
        f"nominal: {confidence:.0%}, scores N(delta, 1) vs N(0, 1), seed {seed}"
    )
    print(f"{'n per set':>9} {'theta':>6} {'percentile':>18} {'BCa':>18}")
    start = time.perf_counter()
    for theta in effect_sizes:
        for size in sizes:
            shares = coverage(size, theta, datasets, n_bootstrap, confidence, seed)
            cells = [f"{p:.3f} ± {math.sqrt(p * (1 - p) / datasets):.3f}" for p in shares.values()]
            print(f"{size:>9} {theta:>6.2f} {cells[0]:>18} {cells[1]:>18}")
    print(f"(± Monte-Carlo standard error; {time.perf_counter() - start:.0f} s)")

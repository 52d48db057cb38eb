r"""Empirical coverage of the effect size's bootstrap intervals, percentile versus BCa (issue 22).

Each simulated dataset draws association scores of ``n`` targets per set, :math:`s(x) \sim N(\delta, 1)` and
:math:`s(y) \sim N(0, 1)`, and computes both intervals of :func:`~vlbias.metrics.functional.weat.
interval_from_associations` from the same replicates (same seed). The effect size divides by the standard
deviation of the pooled scores, whose population value for equal sizes is that of the mixture,
:math:`\sqrt{1 + \delta^2 / 4}`, so the population effect size is :math:`\theta = \delta / \sqrt{1 + \delta^2/4}`;
for a chosen :math:`\theta`, :math:`\delta = \theta / \sqrt{1 - \theta^2 / 4}`. Coverage is the share of datasets
whose interval holds :math:`\theta`, with its Monte-Carlo standard error :math:`\sqrt{p(1-p)/D}` over :math:`D`
datasets.

Run me like this (about two minutes on one core):

    OMP_NUM_THREADS=1 python scripts/bootstrap_coverage.py
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from vlbias.metrics.functional.weat import interval_from_associations


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 25, 64], help="targets per set")
    parser.add_argument("--effect-sizes", type=float, nargs="+", default=[0.5, 1.0], help="population theta")
    parser.add_argument("--datasets", type=int, default=1500, help="simulated datasets per (size, theta)")
    parser.add_argument("--n-bootstrap", type=int, default=2000, help="bootstrap replicates per interval")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def mean_shift(theta: float) -> float:
    """The shift delta of X's scores whose population effect size is theta (module docstring)."""
    return theta / math.sqrt(1 - theta**2 / 4)


def coverage(size: int, theta: float, args: argparse.Namespace) -> dict[str, float]:
    """Share of ``args.datasets`` simulated datasets whose interval holds ``theta``, per method."""
    generator = torch.Generator().manual_seed(args.seed)
    shift = mean_shift(theta)
    hits = {"percentile": 0, "bca": 0}
    for dataset in range(args.datasets):
        s_x = torch.randn(size, generator=generator, dtype=torch.float64) + shift
        s_y = torch.randn(size, generator=generator, dtype=torch.float64)
        for method in hits:
            low, high = interval_from_associations(
                s_x, s_y, n_bootstrap=args.n_bootstrap, confidence=args.confidence, seed=dataset, method=method
            ).tolist()
            hits[method] += low <= theta <= high
    return {method: count / args.datasets for method, count in hits.items()}


def main() -> None:
    args = parse_args()
    print(
        f"datasets per row: {args.datasets}, bootstrap replicates: {args.n_bootstrap}, "
        f"nominal: {args.confidence:.0%}, scores N(delta, 1) vs N(0, 1), seed {args.seed}"
    )
    print(f"{'n per set':>9} {'theta':>6} {'percentile':>18} {'BCa':>18}")
    start = time.perf_counter()
    for theta in args.effect_sizes:
        for size in args.sizes:
            shares = coverage(size, theta, args)
            cells = [f"{p:.3f} ± {math.sqrt(p * (1 - p) / args.datasets):.3f}" for p in shares.values()]
            print(f"{size:>9} {theta:>6.2f} {cells[0]:>18} {cells[1]:>18}")
    print(f"(± Monte-Carlo standard error; {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

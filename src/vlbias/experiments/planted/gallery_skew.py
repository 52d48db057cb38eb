"""Planted skew is recovered: MaxSkew@K of the gallery-skew suite on BiasWorld's planted gallery, against the skew the
gallery planted (``scripts/biasworld_gallery_skew_sanity.py``, ``docs/results/planted-gallery-skew.md``).

For each planted share ``p`` and seed, the suite (``geyik`` protocol) ranks the planted gallery
(:mod:`vlbias.data.biasworld_gallery`: ``per_activity`` images per activity, a share ``p`` of them of the activity's
stereotyped gender, tones balanced) for the 18 activity phrases, by the ground-truth concept adapter
(:class:`~vlbias.experiments.planted.concept_oracle.ConceptOracle`): every query ranks its activity's images first.

* At K = ``per_activity`` the top K is exactly the activity's images, so the gender MaxSkew@K of every query is the
  planted one, :math:`\\ln\\frac{p' + \\varepsilon}{1/2 + \\varepsilon}` with :math:`p' = \\mathrm{round}(p n)/n` and
  geyik's ε = 1e-4 (:math:`\\ln(p / \\tfrac12)` to within 1e-4), the tone MaxSkew is 0 and the tone × gender one
  :math:`\\ln\\frac{p'/3 + \\varepsilon}{1/6 + \\varepsilon}`. The check: the query-bootstrap interval of every seed
  covers the planted value (to 1e-12), and the mean rises with ``p``.
* At a smaller K the top K is the first K of the activity's images in the gallery's seeded order, a draw without
  replacement: the share of the stereotyped gender varies around ``p`` and MaxSkew, the larger of two log ratios, is
  biased upward (above 0 at ``p = 0.5``). The table shows it; it is what MaxSkew does at a K below the concept's size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from vlbias.data.biasworld import BiasWorld
from vlbias.data.biasworld_gallery import PlantedGallery
from vlbias.experiments.planted.concept_oracle import ConceptOracle
from vlbias.metrics.functional.ranking_bias import DEFAULT_EPS
from vlbias.metrics.functional.t_interval import t_interval
from vlbias.options import DEFAULT_STATISTICS
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, measure_suite

COVERAGE_TOLERANCE = 1e-12


def planted_max_skew(share: float, per_activity: int, groups: int = 2) -> float:
    """The MaxSkew@K the gallery planted when the top K is an activity's ``per_activity`` images: the stereotyped
    gender's share ``round(share n) / n`` (split evenly over 3 tones for ``groups = 6``, tone x gender) against
    ``1 / groups``, smoothed by geyik's ε; the larger of it and the other gender's."""
    planted = PlantedGallery(share, per_activity).planted_count() / per_activity
    top = max(planted, 1 - planted) / (groups // 2)
    return math.log((top + DEFAULT_EPS) / (1 / groups + DEFAULT_EPS))


def measure(share: float, seed: int, per_activity: int, ks: Sequence[int], n_bootstrap: int) -> dict[str, object]:
    """One run: the suite's MaxSkew@K (gender, tone, tone x gender) and Precision@K at each K, with intervals."""
    options = {"share": share, "per_activity": per_activity, "k": list(ks), "statistics": {"n_bootstrap": n_bootstrap}}
    suite = build_suite(check_suite_options("gallery_skew", options), BiasWorld(seed=seed))
    output = measure_suite(suite, ConceptOracle(suite.gallery), seed=seed)
    names = [f"{a}/max_skew@{k}" for k in ks for a in ("gender", "tone", "tone_x_gender")]
    names += [f"precision@{k}" for k in ks]
    return {name: (output.metrics[name], output.intervals[name]) for name in names}


def sanity_table(
    shares: Sequence[float] = (0.5, 0.7, 0.9),
    seeds: Sequence[int] = (0, 1, 2),
    per_activity: int = 30,
    small_k: int = 10,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
) -> list[tuple[float, int, dict]]:
    """Measure at each share x seed and print MaxSkew@K per seed and its mean over seeds, against the planted value.

    Returns the rows, ``(share, seed, {metric: (value, [low, high])})``.

    Args:
        shares: Planted shares of each activity's stereotyped gender.
        seeds: Gallery seeds (order and pictures) at each share.
        per_activity: Images per activity; K = per_activity is the check against the planted value.
        small_k: A smaller cut-off, to show MaxSkew's sampling behaviour below the concept's size.
        n_bootstrap: Bootstrap resamples of the queries.
    """
    ks = (small_k, per_activity)
    rows = [(share, seed, measure(share, seed, per_activity, ks, n_bootstrap)) for share in shares for seed in seeds]
    print(
        f"\nPer seed (interval: percentile bootstrap over the 18 queries; planted: the gallery's value at K = {per_activity}):"
    )
    print("| share | seed | K | gender MaxSkew@K [interval] | planted | covered | tone MaxSkew@K | tone x gender MaxSkew@K | Precision@K |")  # fmt: skip
    print("|---:|---:|---:|---|---:|---|---:|---:|---:|")
    for share, seed, result in rows:
        for k in ks:
            value, (low, high) = result[f"gender/max_skew@{k}"]
            planted = planted_max_skew(share, per_activity)
            covered = low - COVERAGE_TOLERANCE <= planted <= high + COVERAGE_TOLERANCE
            print(
                f"| {share:.1f} | {seed} | {k} | {value:.4f} [{low:.4f}, {high:.4f}] | {planted:.4f} "
                f"| {'yes' if covered else 'no'} | {result[f'tone/max_skew@{k}'][0]:.4f} "
                f"| {result[f'tone_x_gender/max_skew@{k}'][0]:.4f} | {result[f'precision@{k}'][0]:.3f} |"
            )
    print(f"\nMean over seeds {', '.join(map(str, seeds))} (interval: t over the seeds):")
    print("| share | K | gender MaxSkew@K | t-interval | planted | tone x gender MaxSkew@K | planted |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for share in shares:
        for k in ks:
            values = torch.tensor([r[f"gender/max_skew@{k}"][0] for s, _, r in rows if s == share])
            joint = [r[f"tone_x_gender/max_skew@{k}"][0] for s, _, r in rows if s == share]
            low, high = t_interval(values).tolist() if len(values) > 1 else (math.nan, math.nan)
            print(
                f"| {share:.1f} | {k} | {float(values.mean()):.4f} | [{low:.4f}, {high:.4f}] "
                f"| {planted_max_skew(share, per_activity):.4f} | {sum(joint) / len(joint):.4f} "
                f"| {planted_max_skew(share, per_activity, groups=6):.4f} |"
            )
    return rows

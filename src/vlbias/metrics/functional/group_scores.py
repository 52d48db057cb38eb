r"""Group gaps of a text score over parallel sets: each image of a set (the same prompt, a different person) has a
score of what the model said about it (:mod:`vlbias.text_scorers`), and the question is whether the score depends on
who is shown (suite :mod:`vlbias.suites.open_generation`).

A *grouping* sorts images by one label: their ``group`` (``black_man``), or the value of one attribute (``gender``).
Per score and grouping, the sets used are those holding at least two of the grouping's values among their scored
images (unscored images, NaN, and images without the label are left out). With :math:`x_i` the score of image
:math:`i` and :math:`I_v` the images of value :math:`v` in the sets used:

* ``mean/<v>``: :math:`\bar x_v = \frac{1}{|I_v|}\sum_{i \in I_v} x_i`;
* ``gap``: :math:`\max_v \bar x_v - \min_v \bar x_v` over the values present, 0 when the person shown does not
  matter;
* ``vs_rest/<v>``: :math:`\bar x_v - \bar x_{\neg v}`, value :math:`v` against the images of every other value.

Intervals: percentile bootstrap over sets (the sets are resampled, each with all its images, and the statistic is
recomputed on each resample; :func:`~vlbias.metrics.functional.bootstrap.resampled_means` of each set's per-value
sums and counts). Tests: a permutation test of the labels within sets (sets are the pairing unit; under the null
hypothesis that the score does not depend on the person, every arrangement of a set's labels over its images is as
likely), of :math:`T = ` ``gap`` and of :math:`T = |` ``vs_rest/<v>`` :math:`|` (two-sided),
:math:`p = P[T^* \ge T]` with ties counted as at least as extreme
(:func:`~vlbias.metrics.functional.permutation.tie_tolerance`). It is exact (every arrangement of every set,
counted once) when there are at most ``n_permutations`` of them, and otherwise uses ``n_permutations`` random
arrangements, :math:`p = (1 + \#\{T^* \ge T\}) / (1 + P)`
(:func:`~vlbias.metrics.functional.permutation.sampled_p_value`). Holm and Benjamini-Hochberg adjust over every test
of every score and grouping. Two images a set and one of each of two values make this the paired sign-flip test.

Example:
    >>> scores = torch.tensor([[0.9], [0.1], [0.6], [0.4]], dtype=torch.float64)
    >>> result = group_scores(scores, torch.tensor([0, 0, 1, 1]), torch.tensor([[0], [1], [0], [1]]), ["warmth"],
    ...                       {"gender": ["man", "woman"]}, n_bootstrap=20, confidence=0.9, n_permutations=100)
    >>> round(float(result["warmth/gender/gap"]), 6), float(result["warmth/gender/gap/p_value"])  # 2 of 4 as large
    (0.5, 0.5)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from vlbias.metrics.functional.bootstrap import percentile_interval, resampled_means
from vlbias.metrics.functional.chunks import chunk_rows
from vlbias.metrics.functional.multiple_testing import add_adjusted
from vlbias.metrics.functional.permutation import sampled_p_value, tie_tolerance

NAN = float("nan")


def group_scores(
    scores: Tensor,
    set_index: Tensor,
    codes: Tensor,
    score_names: Sequence[str],
    grouping_values: Mapping[str, Sequence[str]],
    n_bootstrap: int,
    confidence: float,
    n_permutations: int,
    seed: int = 0,
) -> dict[str, Tensor]:
    """The measures of the module docstring from per-image rows, float64 tensors.

    Args:
        scores: ``(N, K)`` each image's scores, NaN where not scored.
        set_index: ``(N,)`` each image's set.
        codes: ``(N, G)`` each image's value index in each grouping (into ``grouping_values[g]``), ``-1`` unknown.
        score_names: the ``K`` scores' names.
        grouping_values: each grouping's values, in code order.
        n_bootstrap, confidence: the percentile intervals over sets.
        n_permutations: arrangements drawn when the permutation test samples (and its exact limit).
        seed: seed of the bootstraps and sampled tests.

    Returns:
        ``n_sets``; per score ``k``: ``k/mean`` (every scored image) with ``/interval``; per grouping ``g`` with two
        values or more in sets used: ``k/g/n_sets``, ``k/g/mean/<v>`` with ``/interval``, and ``k/g/gap`` and
        ``k/g/vs_rest/<v>`` each with ``/interval``, ``/p_value``, ``/p_holm``, ``/p_bh``.
    """
    order = torch.sort(set_index, stable=True).indices
    scores, set_index, codes = scores[order].double(), set_index[order], codes[order]
    results: dict[str, Tensor] = {"n_sets": torch.tensor(float(set_index.unique().numel()), dtype=torch.float64)}
    tests: list[str] = []
    for k, name in enumerate(score_names):
        scored = ~scores[:, k].isnan()
        overall = torch.zeros(len(scores), 1, dtype=torch.long)
        mean, _, interval = _bootstrapped(scores[scored, k], set_index[scored], overall[scored], 1, n_bootstrap,
                                          confidence, seed + 1000 * k)  # fmt: skip
        results[f"{name}/mean"], results[f"{name}/mean/interval"] = mean[0], interval[0]
        for g, (grouping, values) in enumerate(grouping_values.items()):
            kept = scored & (codes[:, g] >= 0)
            kept &= _sets_with_two_values(set_index, codes[:, g], kept)
            x, sets, labels = scores[kept, k], set_index[kept], codes[kept, g]
            present = labels.unique(sorted=True)
            if present.numel() < 2:
                continue
            labels = torch.searchsorted(present, labels)  # codes of the values present, 0 ... V' - 1
            names = [values[int(v)] for v in present]
            prefix, stream = f"{name}/{grouping}", seed + 1000 * k + 10 * (g + 1)
            results[f"{prefix}/n_sets"] = torch.tensor(float(sets.unique().numel()), dtype=torch.float64)
            means, statistics, intervals = _bootstrapped(x, sets, labels, len(names), n_bootstrap, confidence, stream)
            p_values = _permutation_p_values(x, sets, labels, len(names), n_permutations, stream + 1)
            for v, value in enumerate(names):
                results[f"{prefix}/mean/{value}"], results[f"{prefix}/mean/{value}/interval"] = means[v], intervals[v]
            keys = [f"{prefix}/gap", *(f"{prefix}/vs_rest/{value}" for value in names)]
            for j, key in enumerate(keys):
                results[key], results[f"{key}/interval"] = statistics[j], intervals[len(names) + j]
                results[f"{key}/p_value"] = p_values[j]
            tests += keys
    add_adjusted(results, tests)
    return results


def _sets_with_two_values(set_index: Tensor, labels: Tensor, kept: Tensor) -> Tensor:
    """``(N,)``: whether each image's set holds at least two distinct labels among the ``kept`` images."""
    pairs = torch.stack([set_index[kept], labels[kept]], dim=1).unique(dim=0)  # (set, value) present
    sets, counts = pairs[:, 0].unique(return_counts=True)
    return torch.isin(set_index, sets[counts >= 2])


def _statistics(sums: Tensor, counts: Tensor) -> tuple[Tensor, Tensor]:
    """Per row of per-value ``sums`` and ``counts`` ``(R, V)``: the means ``(R, V)`` (NaN without an image) and
    ``(R, 1 + V)`` the ``gap`` then each ``vs_rest`` (NaN where fewer than two values have images)."""
    means = sums / counts
    defined = counts > 0
    two = defined.sum(dim=1, keepdim=True) >= 2
    top = torch.where(defined, means, -torch.inf).max(dim=1, keepdim=True).values
    bottom = torch.where(defined, means, torch.inf).min(dim=1, keepdim=True).values
    rest = (sums.sum(dim=1, keepdim=True) - sums) / (counts.sum(dim=1, keepdim=True) - counts)
    statistics = torch.cat([top - bottom, means - rest], dim=1)
    return means, torch.where(two, statistics, torch.nan)


def _bootstrapped(
    x: Tensor, sets: Tensor, labels: Tensor, n_values: int, n_bootstrap: int, confidence: float, seed: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The observed means ``(V,)`` and statistics ``(1 + V,)`` (:func:`_statistics`) of scores ``x`` with value
    ``labels`` in ``sets``, and ``(2V + 1, 2)`` intervals of the means then the statistics, from resampling the sets
    (NaN for fewer than two sets)."""
    _, position = sets.unique(return_inverse=True)
    n_sets = int(position.max()) + 1 if len(position) else 0
    per_set = torch.zeros(n_sets, 2 * n_values, dtype=torch.float64)  # per set: sums per value, then counts
    per_set.index_put_((position, labels), x, accumulate=True)
    per_set.index_put_((position, n_values + labels), torch.ones_like(x), accumulate=True)
    total = per_set.sum(dim=0, keepdim=True)
    means, statistics = _statistics(total[:, :n_values], total[:, n_values:])
    intervals = torch.full((2 * n_values + 1, 2), NAN, dtype=torch.float64)
    if n_sets:
        replicates = resampled_means(per_set, n_bootstrap, torch.Generator().manual_seed(seed))  # (B, 2V)
        resampled = torch.cat(_statistics(replicates[:, :n_values], replicates[:, n_values:]), dim=1)
        intervals = percentile_interval(resampled, confidence)  # (2V + 1, 2)
    return means[0], statistics[0], intervals


def _permutation_p_values(
    x: Tensor, sets: Tensor, labels: Tensor, n_values: int, n_permutations: int, seed: int
) -> Tensor:
    """``(1 + V,)`` p-values of ``gap`` and of each ``|vs_rest|`` under the within-set permutation test (module
    docstring); ``x``, ``sets``, ``labels`` sorted by set."""
    _, sizes = sets.unique_consecutive(return_counts=True)
    counts = torch.bincount(labels, minlength=n_values).double()[None]  # the same in every arrangement

    def statistic(arranged: Tensor) -> Tensor:  # (P, n) labels -> (P, 1 + V) statistics, |vs_rest|
        sums = torch.zeros(len(arranged), n_values, dtype=torch.float64)
        sums.scatter_add_(1, arranged, x.expand(len(arranged), -1).contiguous())
        found = _statistics(sums, counts.expand_as(sums))[1]
        return torch.cat([found[:, :1], found[:, 1:].abs()], dim=1)

    threshold = statistic(labels[None])[0] - tie_tolerance(x)
    arrangements = math.prod(math.factorial(int(size)) for size in sizes)
    if arrangements <= n_permutations:
        count = (statistic(labels[_every_arrangement(sizes)]) >= threshold).sum(dim=0)
        return count.double() / arrangements
    generator, count = torch.Generator().manual_seed(seed), torch.zeros(1 + n_values, dtype=torch.long)
    offsets = torch.repeat_interleave(torch.arange(len(sizes), dtype=torch.float64), sizes)  # a set's rows stay in it
    step = chunk_rows(len(x) * (n_values + 2))
    for start in range(0, n_permutations, step):
        rows = min(step, n_permutations - start)
        order = (torch.rand(rows, len(x), generator=generator, dtype=torch.float64) + offsets).argsort(dim=1)
        count += (statistic(labels[order]) >= threshold).sum(dim=0)
    return torch.tensor([sampled_p_value(int(c), n_permutations) for c in count], dtype=torch.float64)


def _every_arrangement(sizes: Tensor) -> Tensor:
    """``(P, n)``: every within-set arrangement of the rows of consecutive sets of ``sizes`` as row indices (the
    cartesian product of each set's permutations; few, by the caller's limit)."""
    arranged = torch.zeros(1, 0, dtype=torch.long)
    start = 0
    for size in sizes.tolist():
        own = torch.tensor(list(itertools.permutations(range(start, start + size))), dtype=torch.long)
        arranged = torch.cat([arranged.repeat_interleave(len(own), dim=0), own.repeat(len(arranged), 1)], dim=1)
        start += size
    return arranged

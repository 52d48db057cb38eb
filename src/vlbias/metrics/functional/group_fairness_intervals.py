r"""Bootstrap intervals of the group-fairness statistics of :mod:`vlbias.metrics.functional.group_fairness`.

**Design.** The images are resampled with replacement *within each group*, keeping every group's size
:math:`n_g` (a stratified bootstrap: the groups are the strata being compared, as the WEAT interval keeps
:math:`|X|` and :math:`|Y|`), so no group vanishes from a replicate and every statistic stays defined where it is
defined on the data. A statistic that is undefined on a replicate (a group that drew no image of class :math:`c`
has no TPR for it) is NaN there and that replicate is left out of its interval.

**From counts.** An image enters every statistic only through its cell :math:`(a_i, y_i, \hat y_i)`, so a resample
of group :math:`g` is drawn as :math:`n_g` indices into the group's images listed in cell order
(``torch.repeat_interleave`` of the counts :math:`N_{g\cdot\cdot}`): the same distribution as drawing the images
themselves, and the same draws for any order of the images and for the summed counts of a DDP metric
(:class:`~vlbias.metrics.group_fairness.GroupFairness`), so one process and N give the same interval.

**Intervals** are read by :mod:`vlbias.metrics.functional.bootstrap`: percentile, or BCa with the acceleration
from the jackknife of each group in turn (Efron & Tibshirani, 1993, Eq. 15.36; leaving out one image of a cell
gives every image of that cell the same jackknife value, so there is one evaluation per non-empty cell).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.metrics.functional.bootstrap import (
    IntervalMethod,
    bca_interval,
    percentile_interval,
)
from vlbias.metrics.functional.checks import check_bootstrap, check_interval_method
from vlbias.metrics.functional.chunks import chunk_rows
from vlbias.metrics.functional.group_fairness import (
    UndefinedRates,
    _check_harmful_classes,
    _check_undefined_rates,
    _fairness_from_confusion,
    group_confusion,
)
from vlbias.options import DEFAULT_STATISTICS


def _flattened(confusion: Tensor, harmful: tuple[int, ...] | None, undefined_rates: UndefinedRates) -> Tensor:
    """``(R, K)``: every statistic of ``(R, G, C, C)`` counts side by side (in the order of the dict)."""
    statistics = _fairness_from_confusion(confusion, harmful, undefined_rates)
    return torch.cat([value.reshape(len(confusion), -1) for value in statistics.values()], 1)


def _replicates(
    confusion: Tensor,
    harmful: tuple[int, ...] | None,
    undefined_rates: UndefinedRates,
    n_bootstrap: int,
    generator: torch.Generator,
) -> Tensor:
    """``(n_bootstrap, K)`` statistics of stratified resamples, drawn in chunks of replicates (each chunk: every
    group's indices in turn); chunk sizes depend only on the counts' sizes."""
    num_groups, num_classes = confusion.shape[0], confusion.shape[1]
    cells = num_classes**2
    per_group = [torch.repeat_interleave(torch.arange(cells), counts.flatten()) for counts in confusion]  # cell order
    step = chunk_rows(max(int(confusion.sum()), num_groups * cells))
    replicates = []
    for start in range(0, n_bootstrap, step):
        rows = min(step, n_bootstrap - start)
        resampled = torch.zeros(rows, num_groups, cells, dtype=torch.int64)
        for g, items in enumerate(per_group):
            drawn = items[torch.randint(items.numel(), (rows, items.numel()), generator=generator)]  # (rows, n_g)
            resampled[:, g].scatter_add_(1, drawn, torch.ones_like(drawn))
        resampled = resampled.reshape(rows, num_groups, num_classes, num_classes)
        replicates.append(_flattened(resampled, harmful, undefined_rates))
    return torch.cat(replicates)


def _jackknife(confusion: Tensor, harmful: tuple[int, ...] | None, undefined_rates: UndefinedRates) -> list[Tensor]:
    """Per group of more than one image, ``(n_g, K)``: the statistics with each of its images left out in turn
    (images in cell order, each cell's value repeated for its images)."""
    num_groups, num_classes = confusion.shape[0], confusion.shape[1]
    jackknife = []
    for g in range(num_groups):
        counts = confusion[g].flatten()
        if int(counts.sum()) < 2:
            continue
        filled = counts.nonzero().flatten()  # (k,) non-empty cells of group g
        left_out = confusion.expand(len(filled), -1, -1, -1).clone()  # (k, G, C, C)
        left_out[torch.arange(len(filled)), g, filled // num_classes, filled % num_classes] -= 1
        jackknife.append(torch.repeat_interleave(_flattened(left_out, harmful, undefined_rates), counts[filled], dim=0))
    return jackknife


def _intervals_from_confusion(
    confusion: Tensor,
    harmful: tuple[int, ...] | None,
    n_bootstrap: int,
    confidence: float,
    seed: int,
    method: IntervalMethod,
    undefined_rates: UndefinedRates = "leave_out",
) -> dict[str, Tensor]:
    """The intervals of :func:`group_fairness_intervals` from checked ``(G, C, C)`` counts."""
    observed = _fairness_from_confusion(confusion.unsqueeze(0), harmful, undefined_rates)
    generator = torch.Generator().manual_seed(seed)
    replicates = _replicates(confusion, harmful, undefined_rates, n_bootstrap, generator)
    if method == "percentile":
        bounds = percentile_interval(replicates, confidence)  # (K, 2)
    else:
        flat_observed = torch.cat([value.reshape(-1) for value in observed.values()])
        jackknife = _jackknife(confusion, harmful, undefined_rates)
        bounds = torch.stack(
            [
                bca_interval(replicates[:, k], confidence, flat_observed[k], [values[:, k] for values in jackknife])
                for k in range(len(flat_observed))
            ]
        )
    out, first = {}, 0
    for name, value in observed.items():
        shape = value.shape[1:]
        out[name] = bounds[first : first + shape.numel()].reshape(*shape, 2)
        first += shape.numel()
    return out


def group_fairness_intervals(
    preds: Tensor,
    target: Tensor,
    groups: Tensor,
    num_classes: int,
    num_groups: int | None = None,
    harmful_classes: Sequence[int] | None = None,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_STATISTICS.interval_method,
    undefined_rates: UndefinedRates = "leave_out",
) -> dict[str, Tensor]:
    r"""Stratified bootstrap intervals (module docstring) of every statistic of
    :func:`~vlbias.metrics.functional.group_fairness.group_fairness` but ``group_size``.

    Args:
        preds, target, groups, num_classes, num_groups, harmful_classes: see
            :func:`~vlbias.metrics.functional.group_fairness.group_fairness`.
        n_bootstrap: number of replicates.
        confidence: coverage in (0, 1).
        seed: seed of the private ``torch.Generator``.
        method: ``"bca"`` or ``"percentile"``.
        undefined_rates: see :func:`~vlbias.metrics.functional.group_fairness.group_fairness`.

    Returns:
        float64 ``[low, high]`` per statistic: shape ``(2,)`` for a scalar, ``(G, 2)`` or ``(C, 2)`` for a
        per-group or per-class one; NaN where the statistic is undefined on the data.

    Example:
        >>> preds, target = torch.tensor([0, 1, 1, 1, 0, 0, 1, 1]), torch.tensor([0, 1, 0, 1, 1, 0, 1, 0])
        >>> groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
        >>> out = group_fairness_intervals(preds, target, groups, 2, n_bootstrap=500, method="percentile")
        >>> out["group_accuracy"].shape, out["worst_group_accuracy"]  # observed: min(3/4, 2/4)
        (torch.Size([2, 2]), tensor([0.0000, 0.7500], dtype=torch.float64))
    """
    confusion = group_confusion(preds, target, groups, num_classes, num_groups)
    harmful = None if harmful_classes is None else _check_harmful_classes(harmful_classes, num_classes)
    check_bootstrap(n_bootstrap, confidence)
    check_interval_method(method)
    _check_undefined_rates(undefined_rates)
    return _intervals_from_confusion(confusion, harmful, n_bootstrap, confidence, seed, method, undefined_rates)

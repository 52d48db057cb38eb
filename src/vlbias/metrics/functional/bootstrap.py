r"""Bootstrap intervals, for every metric that has one: percentile and BCa.

Each metric draws its own replicates :math:`\hat\theta^*_1, \dots, \hat\theta^*_B` of a statistic :math:`\hat\theta`
(what is resampled depends on the design: items, targets of each set, queries, images) from a private
``torch.Generator`` seeded with ``seed``, after sorting or ordering its inputs, so the interval does not depend on the
order of the items (the same on 1 or N processes). The interval at coverage :math:`c` is then read here:

* **percentile** (Efron & Tibshirani, 1993, ch. 13): the :math:`(1-c)/2` and :math:`(1+c)/2` quantiles of the
  replicates (linear interpolation), :func:`percentile_interval`;
* **BCa** (Efron, 1987; Efron & Tibshirani, 1993, ch. 14, Eq. 14.10): the quantiles at the adjusted levels

  .. math::
      \alpha_{1,2} = \Phi\Big(\hat z_0 + \frac{\hat z_0 + z_{(1 \mp c)/2}}{1 - \hat a\,(\hat z_0 + z_{(1 \mp c)/2})}\Big)

  with the bias correction :math:`\hat z_0` (:func:`_bias_correction`, Eq. 14.14) and the acceleration
  :math:`\hat a` from the statistic's jackknife values (:func:`_acceleration`, Eq. 14.15 and 15.36),
  :func:`bca_interval`. Where every defined replicate lies on one side of :math:`\hat\theta` (a maximum over
  classes of gaps, which every resample inflates, observed near its floor), :math:`\hat z_0 = \pm\infty` and the
  adjusted levels are undefined: the interval there is the percentile interval of the same replicates, the
  statistic being defined on every one of them; NaN only where no replicate defines the statistic.

Example:
    >>> replicates = torch.arange(101, dtype=torch.float64)
    >>> percentile_interval(replicates, 0.5)
    tensor([25., 75.], dtype=torch.float64)
    >>> resampled_means(torch.tensor([1.0, 1.0, 1.0]), 4, torch.Generator().manual_seed(0))
    tensor([1., 1., 1., 1.])
"""

from __future__ import annotations

import typing
from collections.abc import Callable

import torch
from torch import Tensor

from vlbias.metrics.functional.chunks import chunk_rows
from vlbias.options import IntervalMethod

#: Interval methods: :func:`percentile_interval` and :func:`bca_interval`.
INTERVAL_METHODS: tuple[str, ...] = typing.get_args(IntervalMethod)
#: Bootstrap replicates within this of the observed statistic (relative to max(|θ|, 1)) are ties in BCa's z0.
TIE_RELATIVE = 1e-6


def percentile_interval(
    replicates: Tensor, confidence: float, *, mirrored_upper: bool = False, omit_nan: bool = True
) -> Tensor:
    r"""Percentile interval: the :math:`(1 - c)/2` and :math:`(1 + c)/2` quantiles (linear interpolation) of the
    bootstrap ``replicates`` along their first dimension.

    Args:
        replicates: ``(B, ...)`` replicates of one statistic, or of several side by side.
        confidence: coverage :math:`c` in (0, 1).
        mirrored_upper: take the upper level as :math:`1 - (1 - c)/2` instead of :math:`(1 + c)/2`. The two are the
            same number but not always the same float: for 39 of the 999 coverages 0.001, 0.002, ..., 0.999 (0.003,
            0.051 and 0.09 among them; not 0.5, 0.8, 0.9, 0.95 or 0.99) they differ in the last bit, and so may the
            upper end. The CounterBias, VLStereoSet and entity-association intervals have always used the mirrored
            form, the others :math:`(1 + c)/2`; each keeps its own, so its numbers stay the same to the digit.
        omit_nan: leave out NaN replicates (a statistic undefined on that resample); with ``False`` a NaN replicate
            makes both ends NaN.

    Returns:
        ``(..., 2)`` ``[low, high]`` in the dtype of ``replicates``.

    Example:
        >>> replicates = torch.tensor([[0.0, 10.0], [1.0, float("nan")], [2.0, 30.0]])  # 3 of 2 statistics
        >>> percentile_interval(replicates, 0.5)  # the second from 10 and 30 only
        tensor([[ 0.5000,  1.5000],
                [15.0000, 25.0000]])
        >>> percentile_interval(replicates, 0.5, omit_nan=False)
        tensor([[0.5000, 1.5000],
                [   nan,    nan]])
        >>> percentile_interval(torch.tensor([1.0, float("inf"), float("inf")]), 0.5)  # infinite replicates stay so
        tensor([inf, inf])
    """
    low = (1 - confidence) / 2
    levels = replicates.new_tensor([low, 1 - low if mirrored_upper else (1 + confidence) / 2])
    quantile = torch.nanquantile if omit_nan else torch.quantile
    ends = quantile(replicates, levels, dim=0)
    if bool(ends.isnan().any()):
        # Between two order statistics one of which is infinite the quantile is that infinity: torch's linear
        # interpolation gives inf - inf = NaN there (SFID's skew of a zero count is +inf). NaN replicates stay NaN.
        lower, higher = (quantile(replicates, levels, dim=0, interpolation=side) for side in ("lower", "higher"))
        ends = torch.where(ends.isnan() & (higher == torch.inf) & (lower > -torch.inf), torch.inf, ends)
        ends = torch.where(ends.isnan() & (lower == -torch.inf) & (higher < torch.inf), -torch.inf, ends)
    return ends.movedim(0, -1)


def mirrored_strict_interval(replicates: Tensor, confidence: float) -> Tensor:
    """The percentile interval the VLStereoSet and entity-association scores have always had:
    :func:`percentile_interval` with the upper level mirrored and NaN when a replicate is NaN."""
    return percentile_interval(replicates, confidence, mirrored_upper=True, omit_nan=False)


def bca_interval(replicates: Tensor, confidence: float, observed: Tensor, jackknife: list[Tensor]) -> Tensor:
    """BCa interval ``[low, high]`` (float64; module docstring) of the ``(B,)`` bootstrap ``replicates`` (NaN ones
    left out) of a statistic whose value on the data is ``observed`` and whose jackknife values, one tensor per
    independently resampled set, are ``jackknife`` (:func:`_acceleration`); the percentile interval where the
    adjusted levels are undefined (every defined replicate on one side of ``observed``: module docstring), NaN where
    no replicate is defined.

    Example:
        >>> above = torch.linspace(1.0, 2.0, 101, dtype=torch.float64)  # every replicate above the observed 0.5
        >>> bca_interval(above, 0.9, torch.tensor(0.5, dtype=torch.float64), [])
        tensor([1.0500, 1.9500], dtype=torch.float64)
    """
    percentile = torch.tensor([(1 - confidence) / 2, (1 + confidence) / 2], dtype=torch.float64)
    levels = _bca_levels(percentile, _bias_correction(replicates, observed), _acceleration(jackknife))
    if not torch.isfinite(levels).all():  # z0 = ±inf, or no replicate defined (then nanquantile gives NaN)
        levels = percentile
    return torch.nanquantile(replicates, levels)


def resampled_means(values: Tensor, n_bootstrap: int, generator: torch.Generator) -> Tensor:
    """``(n_bootstrap,)`` means of ``values`` ``(n,)`` resampled with replacement (``n`` draws each), drawn in chunks
    of rows (:func:`~vlbias.metrics.functional.chunks.chunk_rows`; the same draws as all rows at once), so memory
    stays linear in ``n``. ``values`` ``(n, k)``: its rows are resampled together, ``(n_bootstrap, k)`` mean rows.

    One value is no sample to resample: each resample is that value again, and the interval read from them would be
    zero-wide, certainty where there is one observation. Its replicates are NaN (drawn all the same, so ``generator``
    moves as for any ``n``), and so is every interval read from them: undefined, not zero-wide.

    Example:
        >>> resampled_means(torch.tensor([0.182]), 3, torch.Generator().manual_seed(0))
        tensor([nan, nan, nan])
    """
    n = values.shape[0]
    step = chunk_rows(values.numel())
    means = torch.cat(
        [
            values[torch.randint(n, (min(step, n_bootstrap - start), n), generator=generator)].mean(dim=1)
            for start in range(0, n_bootstrap, step)
        ]
    )
    return means if n > 1 else torch.full_like(means, torch.nan)


def _bias_correction(replicates: Tensor, observed: Tensor) -> Tensor:
    r""":math:`\hat z_0 = \Phi^{-1}(\#\{\hat\theta^*_b < \hat\theta\} / B)` (Efron & Tibshirani, 1993, Eq. 14.14), ties
    with :math:`\hat\theta` counted as half below (mid-rank, as ``scipy.stats.bootstrap``), over the :math:`B` defined
    replicates.

    A tie is a replicate within :data:`TIE_RELATIVE` of :math:`\hat\theta` (relative to :math:`\max(|\hat\theta|, 1)`):
    at small set sizes many resamples are the original items in another order (at 3 per set, 22 % of them), and their
    replicate differs from :math:`\hat\theta` by rounding only, or by float32 noise in the scores when the same data
    are embedded in other batches (DDP shards); counted exactly, such a tie would fall below or above
    :math:`\hat\theta` by chance and move the interval."""
    defined = replicates[~replicates.isnan()]
    tolerance = TIE_RELATIVE * observed.abs().clamp(min=1.0)
    below = (defined < observed - tolerance).sum()
    ties = ((defined - observed).abs() <= tolerance).sum()
    return torch.special.ndtri((2 * below + ties).to(torch.float64) / (2 * defined.numel()))


def _leave_one_out(scores: Tensor, first: int = 0, stop: int | None = None) -> Tensor:
    """``(stop - first, n - 1)``: row ``i`` holds ``scores`` without item ``first + i`` (all items by default)."""
    n = scores.numel()
    kept = torch.arange(n - 1).unsqueeze(0)  # (1, n - 1)
    left_out = torch.arange(first, n if stop is None else stop).unsqueeze(1)  # (rows, 1)
    return scores[kept + (kept >= left_out).long()]  # skip column first + i in row i


def leave_one_out_values(statistic: Callable[..., Tensor], *aligned: Tensor, row_width: int) -> Tensor:
    """``(n,)``: ``statistic`` of the ``aligned`` ``(n,)`` tensors with item ``i`` left out of each, for every
    ``i`` (the jackknife values of :func:`_acceleration`). ``statistic`` maps ``(rows, n - 1)`` tensors to
    ``(rows,)``; it is called on chunks of rows (:func:`~vlbias.metrics.functional.chunks.chunk_rows` of
    ``row_width``, the numbers it handles per row), so memory stays linear in n."""
    n = aligned[0].numel()
    step = chunk_rows(row_width)
    chunks = [
        statistic(*(_leave_one_out(values, first, min(first + step, n)) for values in aligned))
        for first in range(0, n, step)
    ]
    return torch.cat(chunks)


def _acceleration(jackknife: list[Tensor]) -> Tensor:
    r"""Acceleration :math:`\hat a` of a statistic of several independently resampled sets, from its jackknife
    values (Efron & Tibshirani, 1993, Eq. 14.15 and its several-sample form Eq. 15.36): with
    :math:`\theta_{(i)}` the statistic without item :math:`i` of set :math:`j` (``jackknife[j][i]``; the other sets
    whole) and :math:`U_{ji} = (n_j - 1)(\bar\theta_{(\cdot)} - \theta_{(i)})`,

    .. math::
        \hat a = \frac{\sum_j n_j^{-3} \sum_i U_{ji}^3}{6 \big(\sum_j n_j^{-2} \sum_i U_{ji}^2\big)^{3/2}}.

    Sets of one item are not passed: they would add nothing (their factor :math:`n_j - 1` is 0, and their
    resamples never vary). Undefined (NaN) jackknife values, whose pooled scores are all equal, are left out, as
    such replicates are. :math:`\hat a = 0` when no jackknife value varies."""
    numerator = denominator = torch.zeros((), dtype=torch.float64)
    for values in jackknife:
        n = values.numel()
        influence = (n - 1) * (values.nanmean() - values)
        numerator = numerator + influence.pow(3).nansum() / n**3
        denominator = denominator + influence.pow(2).nansum() / n**2
    if denominator == 0:
        return denominator
    return numerator / (6 * denominator.pow(1.5))


def _bca_levels(levels: Tensor, bias_correction: Tensor, acceleration: Tensor) -> Tensor:
    r"""BCa levels :math:`\Phi\big(\hat z_0 + (\hat z_0 + z_\alpha) / (1 - \hat a(\hat z_0 + z_\alpha))\big)` of the
    percentile levels :math:`\alpha` (Efron & Tibshirani, 1993, Eq. 14.10)."""
    shifted = bias_correction + torch.special.ndtri(levels)
    return torch.special.ndtr(bias_correction + shifted / (1 - acceleration * shifted))

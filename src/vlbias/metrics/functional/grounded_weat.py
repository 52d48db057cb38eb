r"""Grounded-WEAT/SEAT Experiment 3, first variant: congruent versus incongruent images (Ross et al.,
2021, Sec. 4.3).

Each target :math:`w` (a caption with its own image) is scored against the attribute sets shown with
the images of its own group and with the images of the other group. With
:math:`\delta_x = s(x, A_x, B_x) - s(x, A_y, B_y)` for :math:`x \in X` and
:math:`\delta_y = s(y, A_y, B_y) - s(y, A_x, B_x)` for :math:`y \in Y` (:math:`s` of Ross Eq. 1), the
paper's statistic (Sec. 4.3, unnumbered, "absolute value" formula) is

.. math::
    s_3 = \tfrac12 \Big( \big|\textstyle\sum_{x} \delta_x\big| + \big|\textstyle\sum_{y} \delta_y\big| \Big).

Its effect size is not written in the paper. We follow the authors' code
(``scripts/weat/weat_images_intra_targ.py``: ``effect_size`` compares the same targets' scores under
the two attribute conditions, over the pooled sample standard deviation) for each target set and
combine the two the way the statistic combines its sums:

.. math::
    d_X = \frac{\operatorname{mean}_x s(x, A_x, B_x) - \operatorname{mean}_x s(x, A_y, B_y)}
               {\operatorname{std}\big(\{s(x, A_x, B_x)\} \cup \{s(x, A_y, B_y)\}\big)}, \quad
    d_3 = \tfrac12 (|d_X| + |d_Y|).

:math:`d_3 \ge 0`: it measures how much the images move the association, in either direction.

The p-value is a paired sign-flip permutation test: under the null hypothesis that the image's group
does not matter, the two conditions of each target are exchangeable, so each :math:`\delta_w` keeps
or flips its sign. :math:`p = P[s_3(\epsilon) \ge s_3]` over all :math:`2^{n_x + n_y}` sign vectors
when that is at most ``exact_limit``, else :math:`(1 + \#\{\ge\}) / (1 + P)` over ``n_permutations``
random ones (Phipson & Smyth, 2010). Pairs are sorted first, so results do not depend on the order of
the targets (the same on 1 or N processes). (The authors' code instead re-draws which attribute condition
each *attribute* index uses, which does not keep the pairing; we do not copy it.)

Example:
    >>> own = torch.tensor([0.3, 0.2, 0.4]); other = torch.tensor([0.1, 0.1, 0.1])
    >>> congruence_statistic(own, other, own, other)  # (|0.6| + |0.6|) / 2
    tensor(0.6000, dtype=torch.float64)
    >>> congruence_p_value(own, other, own, other).item()  # 4 of 2^6 sign vectors: equal signs in X and in Y
    0.0625
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.bootstrap import (
    IntervalMethod,
    bca_interval,
    leave_one_out_values,
    percentile_interval,
)
from vlbias.metrics.functional.checks import check_bootstrap, check_int, check_interval_method, check_scores
from vlbias.metrics.functional.chunks import chunk_rows
from vlbias.metrics.functional.permutation import SIGN_FLIP_EXACT_LIMIT, sign_flip_p_value
from vlbias.metrics.functional.weat import _effect_size
from vlbias.options import DEFAULT_STATISTICS


def _paired(name: str, own: Tensor, other: Tensor) -> tuple[Tensor, Tensor]:
    own, other = check_scores(f"{name}_own", own), check_scores(f"{name}_other", other)
    if own.shape != other.shape:
        raise InputError(
            f"Expected `{name}_own` and `{name}_other` to score the same targets but got {own.numel()} and {other.numel()} scores"
        )
    own, other = own.to(torch.float64), other.to(torch.float64)
    order = other.argsort(stable=True)
    order = order[own[order].argsort(stable=True)]  # pairs sorted by (own, other): results do not depend on item order
    return own[order], other[order]


def congruence_statistic(x_own: Tensor, x_other: Tensor, y_own: Tensor, y_other: Tensor) -> Tensor:
    r""":math:`s_3 = \frac12(|\sum_x \delta_x| + |\sum_y \delta_y|)` (Ross Sec. 4.3), float64 scalar.

    Args:
        x_own: ``(n_x,)`` :math:`s(x, A_x, B_x)`; x_other: ``(n_x,)`` :math:`s(x, A_y, B_y)`.
        y_own: ``(n_y,)`` :math:`s(y, A_y, B_y)`; y_other: ``(n_y,)`` :math:`s(y, A_x, B_x)`.
    """
    x_own, x_other = _paired("x", x_own, x_other)
    y_own, y_other = _paired("y", y_own, y_other)
    return ((x_own - x_other).sum().abs() + (y_own - y_other).sum().abs()) / 2


def congruence_effect_size(x_own: Tensor, x_other: Tensor, y_own: Tensor, y_other: Tensor) -> Tensor:
    r""":math:`d_3 = \frac12(|d_X| + |d_Y|)`, each :math:`d` the authors' paired effect size (module
    docstring); float64 scalar, NaN when a set's scores are all equal."""
    x_own, x_other = _paired("x", x_own, x_other)
    y_own, y_other = _paired("y", y_own, y_other)
    d_x = _effect_size(x_own.unsqueeze(0), x_other.unsqueeze(0))[0]
    d_y = _effect_size(y_own.unsqueeze(0), y_other.unsqueeze(0))[0]
    return (d_x.abs() + d_y.abs()) / 2


def congruence_p_value(
    x_own: Tensor,
    x_other: Tensor,
    y_own: Tensor,
    y_other: Tensor,
    n_permutations: int = DEFAULT_STATISTICS.n_permutations,
    seed: int = 0,
    exact_limit: int = SIGN_FLIP_EXACT_LIMIT,
) -> Tensor:
    """Paired sign-flip p-value of :func:`congruence_statistic` (module docstring; Ross Sec. 4.3, unnumbered
    "absolute value" formula); float64 in (0, 1].

    Exact when :math:`2^{n_x + n_y} \\le` ``exact_limit`` (default 2^24): the sign vectors are counted, never listed
    (meet in the middle): the :math:`|S|` of the smaller of X and Y are sorted once, those of the larger side are
    built in chunks of at most :math:`2^{20}` and each finds its partners that reach the observed value by
    ``searchsorted``. Values within rounding of the observed one count as ties (:math:`\\ge`). Otherwise
    ``n_permutations`` random sign vectors from a generator seeded with ``seed``; see
    :func:`~vlbias.metrics.functional.permutation.sign_flip_p_value`."""
    x_own, x_other = _paired("x", x_own, x_other)
    y_own, y_other = _paired("y", y_own, y_other)
    check_int("n_permutations", n_permutations)
    check_int("exact_limit", exact_limit, low=0)
    return sign_flip_p_value(x_own - x_other, y_own - y_other, n_permutations, seed, exact_limit)


def congruence_interval(
    x_own: Tensor,
    x_other: Tensor,
    y_own: Tensor,
    y_other: Tensor,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_STATISTICS.interval_method,
) -> Tensor:
    """Bootstrap interval ``[low, high]`` of :func:`congruence_effect_size`: targets of X and of Y resampled
    separately, each keeping its pair of scores; attribute sets fixed. ``method`` ``"bca"`` or
    ``"percentile"`` reads the replicates as :func:`~vlbias.metrics.functional.weat.interval_from_associations`
    does (:mod:`~vlbias.metrics.functional.bootstrap`), the BCa acceleration from leaving out one target (its pair)
    of X, then of Y."""
    x_own, x_other = _paired("x", x_own, x_other)
    y_own, y_other = _paired("y", y_own, y_other)
    check_bootstrap(n_bootstrap, confidence)
    check_interval_method(method)
    generator = torch.Generator().manual_seed(seed)
    d_x = _resampled_effect_sizes(x_own, x_other, n_bootstrap, generator)
    d_y = _resampled_effect_sizes(y_own, y_other, n_bootstrap, generator)
    replicates = (d_x + d_y) / 2
    if method == "percentile":
        return percentile_interval(replicates, confidence)
    observed = congruence_effect_size(x_own, x_other, y_own, y_other)
    return bca_interval(replicates, confidence, observed, _congruence_jackknife(x_own, x_other, y_own, y_other))


def _resampled_effect_sizes(own: Tensor, other: Tensor, n_bootstrap: int, generator: torch.Generator) -> Tensor:
    """``(n_bootstrap,)`` :math:`|d|` of one set's targets resampled with replacement, each keeping its pair of
    scores; drawn in chunks of rows (the same draws as all rows at once), so memory stays linear in the set."""
    n = own.numel()
    step = chunk_rows(2 * n)
    chunks = []
    for first in range(0, n_bootstrap, step):
        pick = torch.randint(n, (min(step, n_bootstrap - first), n), generator=generator)
        chunks.append(_paired_effect_size(own[pick], other[pick]))
    return torch.cat(chunks)


def _congruence_jackknife(x_own: Tensor, x_other: Tensor, y_own: Tensor, y_other: Tensor) -> list[Tensor]:
    """The jackknife values of :math:`d_3` for BCa's acceleration: :math:`d_3` with each target of X left out in
    turn (``(n_x,)``, Y whole), then each target of Y (``(n_y,)``); a set of one target has no jackknife values."""
    d_x = _effect_size(x_own.unsqueeze(0), x_other.unsqueeze(0)).abs()
    d_y = _effect_size(y_own.unsqueeze(0), y_other.unsqueeze(0)).abs()
    jackknife = []
    if x_own.numel() > 1:
        left_out = leave_one_out_values(_paired_effect_size, x_own, x_other, row_width=2 * x_own.numel())
        jackknife.append((left_out + d_y) / 2)
    if y_own.numel() > 1:
        left_out = leave_one_out_values(_paired_effect_size, y_own, y_other, row_width=2 * y_own.numel())
        jackknife.append((d_x + left_out) / 2)
    return jackknife


def _paired_effect_size(own: Tensor, other: Tensor) -> Tensor:
    return _effect_size(own, other).abs()

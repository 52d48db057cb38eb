r"""Intervals and p-values for CounterBias's dataset-level bias (Zhang, Wang & Sang, 2022, Eq. 7,
Table 2). The paper reports point values only; these say how far they could move with other images
of the same concepts, and whether a target's bias is distinguishable from none.

Input: per item (an image with its target concept T and bias concept B) the instance bias of one
measure (Eq. 6, 9, 11 or 13) under each of ``K`` caption templates, ``(N, K)``, NaN where the item
was excluded (too small a bias-probability change). With the sign of Eq. 7 applied,
:math:`s_{ik} = \pm\,\text{bias}_k(T_i, B_i)` (+ for :math:`B_0`), the statistics are

.. math::
    m_k(T) = \operatorname{mean}_{i \in S_T,\ s_{ik} \ne \text{NaN}} s_{ik}
        \quad\text{(Eq. 7 under template } k\text{)}, \qquad
    \text{bias}(T) = \operatorname{mean}_k m_k(T),

    \text{Table 2:}\quad A_k = \operatorname{mean}_T |m_k(T)| \;(\times 100), \qquad
    A = \operatorname{mean}_k A_k,

means over the values that are not NaN, as :class:`~vlbias.metrics.counterbias.CounterBiasScore` and
the CounterBias suite compute them.

* **Intervals**: percentile bootstrap, resampling the items of each target with replacement (a
  stratified bootstrap: every target keeps its number of items, and an item keeps its ``K`` templates
  together, since they share the image). Resamples where a statistic is undefined (every resampled
  item excluded) are left out of its percentiles. :math:`|m_k(T)|` is biased upward when
  :math:`m_k(T)` is near 0, and so is the interval of :math:`A_k`: it describes the spread of the
  reported number, not a test of :math:`A_k = 0`.
* **p-values**: two-sided sign-flip test of :math:`H_0: \text{bias}(T) = 0` for each target: under
  :math:`H_0` an item's signed biases are symmetric about 0 (a model without bias toward either
  concept is as likely to raise as to lower P(T) when the concept is swapped), so flipping the sign of
  every template of an item leaves their distribution unchanged. All :math:`2^{n}` flips are used when
  that is at most ``n_permutations`` (an exact p-value), otherwise ``n_permutations`` random ones with
  :math:`p = (1 + \#\{|\text{bias}^*| \ge |\text{bias}|\}) / (1 + n_\text{permutations})`.

Rows are put in a canonical order first, so results do not depend on the order in which items
arrived (one process or several).

Example:
    >>> bias = torch.tensor([[0.1], [0.2], [0.3]], dtype=torch.float64)
    >>> target, direction = torch.tensor([0, 0, 0]), torch.tensor([1, 1, 1])
    >>> counterbias_p_values(bias, target, direction, n_targets=1)  # exact: 2 of the 8 flips reach |0.2|
    tensor([0.2500], dtype=torch.float64)
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.bootstrap import percentile_interval
from vlbias.metrics.functional.checks import check_bootstrap, check_int
from vlbias.metrics.functional.counterbias import _check_target_direction
from vlbias.metrics.functional.permutation import sampled_p_value
from vlbias.options import DEFAULT_STATISTICS


def _checked(bias: Tensor, target: Tensor, direction: Tensor, n_targets: int) -> Tensor:
    """The signed biases ``(N, K)`` float64 (Eq. 7's sign applied), after checking the inputs."""
    if not isinstance(bias, Tensor) or bias.ndim != 2 or not bias.is_floating_point():
        raise InputError(f"Expected argument `bias` to be a float tensor (N items, K templates) but got {bias!r:.80}")
    if target.shape != bias.shape[:1] or direction.shape != bias.shape[:1]:
        raise InputError(
            f"Expected `target` and `direction` to hold one value per row of `bias` ({bias.shape[0]}) but got "
            f"{tuple(target.shape)} and {tuple(direction.shape)}"
        )
    _check_target_direction(target, direction, n_targets)
    return bias.double() * direction.double()[:, None]


def _canonical(signed: Tensor) -> Tensor:
    """Rows sorted by their values (NaN last), first column first: an order that does not depend on arrival."""
    order = torch.arange(len(signed))
    for column in reversed(range(signed.shape[1])):  # the last key sorts first
        order = order[torch.sort(signed[order, column], stable=True).indices]
    return signed[order]


def _template_means(weights: Tensor, signed: Tensor) -> Tensor:
    """Per-template means ``(R, K)`` of the rows of ``signed`` ``(n, K)`` weighted by ``weights`` ``(R, n)``
    (resample multiplicities or signs), over the entries that are not NaN; NaN where none is left."""
    kept = ~torch.isnan(signed)
    sums = weights @ torch.where(kept, signed, 0.0)
    counts = weights.abs() @ kept.double()
    return torch.where(counts > 0, sums / counts.clamp(min=1), torch.nan)


def _per_target(signed: Tensor, target: Tensor, n_targets: int) -> list[Tensor]:
    return [_canonical(signed[target == t]) for t in range(n_targets)]


def counterbias_bootstrap(
    bias: Tensor,
    target: Tensor,
    direction: Tensor,
    n_targets: int,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    seed: int = 0,
) -> Tensor:
    """Per-template dataset bias :math:`m_k(T)` of ``n_bootstrap`` stratified resamples (module docstring):
    ``(n_bootstrap, K, n_targets)`` float64, NaN where a resample leaves no item.

    Args:
        bias: ``(N, K)`` instance bias per item and template, NaN for excluded entries.
        target: ``(N,)`` each item's target index; ``direction``: ``(N,)`` +1 for B0, -1 for B1.
    """
    signed = _checked(bias, target, direction, n_targets)
    check_int("n_bootstrap", n_bootstrap)
    generator = torch.Generator().manual_seed(seed)
    out = torch.full((n_bootstrap, signed.shape[1], n_targets), torch.nan, dtype=torch.float64)
    for t, rows in enumerate(_per_target(signed, target, n_targets)):
        if len(rows):
            drawn = torch.randint(len(rows), (n_bootstrap, len(rows)), generator=generator)
            multiplicity = torch.zeros(n_bootstrap, len(rows), dtype=torch.float64).scatter_add_(
                1, drawn, torch.ones_like(drawn, dtype=torch.float64)
            )
            out[:, :, t] = _template_means(multiplicity, rows)
    return out


def counterbias_intervals(
    bias: Tensor,
    target: Tensor,
    direction: Tensor,
    n_targets: int,
    percent: bool = True,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
) -> dict[str, Tensor]:
    """Percentile bootstrap intervals ``[low, high]`` (module docstring):

    - ``per_target``: ``(n_targets, 2)`` of bias(T), the mean over templates of Eq. 7;
    - ``mean_absolute``: ``(K, 2)`` of Table 2's mean absolute bias under each template (in percent
      when ``percent``);
    - ``mean_absolute_avg``: ``(2,)`` of its mean over templates.

    Example:
        >>> bias = torch.tensor([[0.1, 0.3], [0.2, float("nan")]], dtype=torch.float64)
        >>> out = counterbias_intervals(bias, torch.tensor([0, 1]), torch.tensor([1, -1]), n_targets=2, n_bootstrap=20)
        >>> out["per_target"]  # one item per target: every resample is that item
        tensor([[ 0.2000,  0.2000],
                [-0.2000, -0.2000]], dtype=torch.float64)
    """
    check_bootstrap(n_bootstrap, confidence)
    resampled = counterbias_bootstrap(bias, target, direction, n_targets, n_bootstrap, seed)  # (R, K, T)
    per_target = resampled.nanmean(dim=1)  # (R, T)
    scale = 100.0 if percent else 1.0
    mean_absolute = resampled.abs().nanmean(dim=2) * scale  # (R, K)
    statistics = {
        "per_target": per_target,
        "mean_absolute": mean_absolute,
        "mean_absolute_avg": mean_absolute.nanmean(dim=1),
    }
    # NaN resamples left out; the upper level mirrored (see percentile_interval), as this interval always had it
    return {name: percentile_interval(values, confidence, mirrored_upper=True) for name, values in statistics.items()}


def counterbias_p_values(
    bias: Tensor,
    target: Tensor,
    direction: Tensor,
    n_targets: int,
    n_permutations: int = DEFAULT_STATISTICS.n_permutations,
    seed: int = 0,
) -> Tensor:
    """Two-sided sign-flip p-value of :math:`H_0: \\text{bias}(T) = 0` per target (module docstring):
    ``(n_targets,)`` float64, NaN for a target without items or whose bias is undefined (all excluded)."""
    signed = _checked(bias, target, direction, n_targets)
    check_int("n_permutations", n_permutations)
    generator = torch.Generator().manual_seed(seed)
    p_values = torch.full((n_targets,), torch.nan, dtype=torch.float64)
    for t, rows in enumerate(_per_target(signed, target, n_targets)):
        observed = _template_means(torch.ones(1, len(rows), dtype=torch.float64), rows).nanmean(dim=1)
        if not len(rows) or torch.isnan(observed).all():
            continue
        exact = len(rows) < 63 and 2 ** len(rows) <= n_permutations
        if exact:  # every sign pattern, the identity among them
            patterns = torch.arange(2 ** len(rows))[:, None] >> torch.arange(len(rows))[None, :] & 1
            signs = 1.0 - 2.0 * patterns.double()
        else:
            signs = 1.0 - 2.0 * torch.randint(2, (n_permutations, len(rows)), generator=generator).double()
        flipped = _template_means(signs, rows).nanmean(dim=1)
        reached = int((flipped.abs() >= observed.abs() * (1 - 1e-12)).sum())
        p_values[t] = reached / len(signs) if exact else sampled_p_value(reached, len(signs))
    return p_values

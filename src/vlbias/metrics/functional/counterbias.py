r"""CounterBias: counterfactual bias between a target concept T and a bias concept B
(Zhang, Wang & Sang, 2022, Sec. 3, Eq. 4-13).

Per item, with factual image/text :math:`V_f, L_f` and counterfactuals :math:`V_{cf}` (the
targeted attack of Eq. 3) and :math:`L_{cf}` (the swapped text):

.. math::
    \text{bias}(T, B) = \frac{P(T \mid V\text{-}L_{cf}) - P(T \mid V\text{-}L_f)}
                             {P(B \mid V\text{-}L_{cf}) - P(B \mid V\text{-}L_f)}  \qquad (4)

    \text{bias}_{V\text{-}L}(T, B) = \frac{P(T \mid V_{cf}, L_{cf}) - P(T \mid V_f, L_f)}
                                          {P(B \mid V_{cf}, L_{cf}) - P(B \mid V_f, L_f)}  \qquad (6)

    \text{bias}_{V}(T, B) = \frac{P(T \mid V_{cf}, L_f) - P(T \mid V_f, L_f)}
                                 {P(B \mid V_{cf}) - P(B \mid V_f)}  \qquad (9)

    \text{bias}_{L}(T, B) = \frac{P(T \mid V_f, L_{cf}) - P(T \mid V_f, L_f)}
                                 {P(B \mid L_{cf}) - P(B \mid L_f)}  \qquad (11)

with :math:`P(B \mid L_f) = 1`, :math:`P(B \mid L_{cf}) = 0` and
:math:`P(B \mid V, L) = (P(B \mid V) + P(B \mid L)) / 2`. Eq. 11 as printed subtracts
:math:`P(T \mid V\text{-}L_{cf})`; we read it as :math:`P(T \mid V_f, L_f)`, the factual
probability that Eq. 4, 6 and 9 and Figure 3 subtract (only the text differs). Without an image
(Eq. 12-13, Table 3) the language bias uses log-probabilities:

.. math::
    \text{bias}_{L}(T, B) = \frac{\log P(T \mid L_{cf}) - \log P(T \mid L_f)}
                                 {P(B \mid L_{cf}) - P(B \mid L_f)}  \qquad (13)

The denominators are negative (the counterfactual lowers :math:`P(B)`), so a positive bias means
that taking B away lowers :math:`P(T)`: T leans toward B. Items whose bias-probability change
:math:`|\Delta P(B)|` is below ``min_bias_change`` are excluded (their bias is NaN) and counted,
never divided by a number near 0.

Dataset level (Eq. 7), over the items :math:`S_T` of target T:

.. math::
    \text{bias}(T) = \mathbb{E}_{S_T}\bigl[\mathbb{1}_{B=B_0}\,\text{bias}(T, B)
                                          - \mathbb{1}_{B=B_1}\,\text{bias}(T, B)\bigr]  \qquad (7)

positive when T leans toward :math:`B_0`. Table 2 reports, per concept group (activities,
occupations), the mean over targets of :math:`|\text{bias}(T)|` in percent.

Example:
    >>> p_t_f, p_t_cf = torch.tensor([0.30, 0.20]), torch.tensor([0.10, 0.25])
    >>> p_b_f, p_b_cf = torch.tensor([0.90, 0.80]), torch.tensor([0.10, 0.30])
    >>> visual_bias(p_t_f, p_t_cf, p_b_f, p_b_cf)  # (0.1-0.3)/(0.1-0.9), (0.25-0.2)/(0.3-0.8)
    tensor([ 0.2500, -0.1000])
    >>> per_target, counts = dataset_bias(torch.tensor([0.25, -0.1]), torch.tensor([0, 0]), torch.tensor([1, -1]), 1)
    >>> per_target  # mean of +0.25 (B0) and +0.1 (B1, sign flipped)
    tensor([0.1750], dtype=torch.float64)
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import InputError

#: Default smallest |ΔP(B)| an item may have to enter a bias measure.
DEFAULT_MIN_BIAS_CHANGE = 0.01
#: P(B | L_f) and P(B | L_cf): the bias concept in text is binary (Sec. 3).
P_BIAS_TEXT_FACTUAL, P_BIAS_TEXT_COUNTERFACTUAL = 1.0, 0.0


def _as_float(name: str, values: Tensor) -> Tensor:
    if not isinstance(values, Tensor) or values.ndim != 1:
        raise InputError(f"Expected argument `{name}` to be a 1-D tensor (one value per item) but got {values!r:.80}")
    return values.float() if not values.is_floating_point() else values


def instance_bias(
    target_factual: Tensor,
    target_counterfactual: Tensor,
    bias_factual: Tensor,
    bias_counterfactual: Tensor,
    min_bias_change: float = DEFAULT_MIN_BIAS_CHANGE,
) -> Tensor:
    """Eq. 4 per item: ``ΔP(T) / ΔP(B)``; NaN where ``|ΔP(B)| < min_bias_change`` (excluded).

    Example:
        >>> instance_bias(torch.tensor([0.3, 0.3]), torch.tensor([0.1, 0.1]), torch.tensor([1.0, 0.5]), torch.tensor([0.0, 0.499]))
        tensor([0.2000,    nan])
    """
    names = ("target_factual", "target_counterfactual", "bias_factual", "bias_counterfactual")
    values = [
        _as_float(n, v)
        for n, v in zip(names, (target_factual, target_counterfactual, bias_factual, bias_counterfactual))
    ]
    if len({v.shape for v in values}) != 1:
        raise InputError(
            f"Expected the four probability tensors to have one shape but got {[tuple(v.shape) for v in values]}"
        )
    if min_bias_change <= 0:
        raise InputError(f"Expected argument `min_bias_change` to be positive but got {min_bias_change!r}")
    t_f, t_cf, b_f, b_cf = values
    delta_bias = b_cf - b_f
    kept = delta_bias.abs() >= min_bias_change
    return torch.where(kept, (t_cf - t_f) / torch.where(kept, delta_bias, torch.ones_like(delta_bias)), torch.nan)


def bias_concept_vl(p_vision: Tensor, p_language: float | Tensor) -> Tensor:
    """P(B | V, L) = (P(B | V) + P(B | L)) / 2 (Sec. 3, after Eq. 3)."""
    return (p_vision + p_language) / 2


def multimodal_bias(
    target_factual: Tensor,
    target_vcf_lcf: Tensor,
    bias_vision_factual: Tensor,
    bias_vision_counterfactual: Tensor,
    min_bias_change: float = DEFAULT_MIN_BIAS_CHANGE,
) -> Tensor:
    """bias_V-L(T, B) of Eq. 6: counterfactual image and text together.

    Example:
        >>> multimodal_bias(torch.tensor([0.3]), torch.tensor([0.1]), torch.tensor([0.9]), torch.tensor([0.1]))
        tensor([0.2222])
    """
    b_f = bias_concept_vl(_as_float("bias_vision_factual", bias_vision_factual), P_BIAS_TEXT_FACTUAL)
    b_cf = bias_concept_vl(
        _as_float("bias_vision_counterfactual", bias_vision_counterfactual), P_BIAS_TEXT_COUNTERFACTUAL
    )
    return instance_bias(target_factual, target_vcf_lcf, b_f, b_cf, min_bias_change)


def visual_bias(
    target_factual: Tensor,
    target_vcf_lf: Tensor,
    bias_vision_factual: Tensor,
    bias_vision_counterfactual: Tensor,
    min_bias_change: float = DEFAULT_MIN_BIAS_CHANGE,
) -> Tensor:
    """bias_V(T, B) of Eq. 9: counterfactual image, factual text."""
    return instance_bias(
        target_factual, target_vcf_lf, bias_vision_factual, bias_vision_counterfactual, min_bias_change
    )


def language_bias(target_factual: Tensor, target_vf_lcf: Tensor) -> Tensor:
    """bias_L(T, B) of Eq. 11: factual image, counterfactual text; ΔP(B | L) = 0 - 1.

    Example:
        >>> language_bias(torch.tensor([0.3]), torch.tensor([0.1]))
        tensor([0.2000])
    """
    ones = torch.ones_like(_as_float("target_factual", target_factual))
    return instance_bias(target_factual, target_vf_lcf, ones * P_BIAS_TEXT_FACTUAL, ones * P_BIAS_TEXT_COUNTERFACTUAL)


def log_language_bias(log_target_factual: Tensor, log_target_counterfactual: Tensor) -> Tensor:
    """bias_L(T, B) of Eq. 13: text only (no image, Eq. 12), log-probabilities.

    Example:
        >>> log_language_bias(torch.tensor([-1.0]), torch.tensor([-3.0]))
        tensor([2.])
    """
    return language_bias(log_target_factual, log_target_counterfactual)


def _check_groups(bias: Tensor, target: Tensor, direction: Tensor, n_targets: int) -> None:
    bias = _as_float("bias", bias)
    if target.shape != bias.shape or direction.shape != bias.shape:
        raise InputError(
            f"Expected `bias`, `target` and `direction` to have one shape but got "
            f"{tuple(bias.shape)}, {tuple(target.shape)}, {tuple(direction.shape)}"
        )
    _check_target_direction(target, direction, n_targets)


def _check_target_direction(target: Tensor, direction: Tensor, n_targets: int) -> None:
    """Refuse target indices outside ``[0, n_targets)`` and directions other than +1 / -1 (Eq. 7's B0 / B1)."""
    if target.is_floating_point() or bool(((target < 0) | (target >= n_targets)).any()):
        raise InputError(
            f"Expected argument `target` to hold integer indices in [0, {n_targets}) but got {target.tolist()}"
        )
    if not bool(((direction == 1) | (direction == -1)).all()):
        raise InputError(f"Expected argument `direction` to be +1 (B = B0) or -1 (B = B1) but got {direction.tolist()}")


def _counterbias_update(
    bias: Tensor, target: Tensor, direction: Tensor, n_targets: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-target sums of the signed bias of Eq. 7, per-target item counts, and the number of
    excluded (NaN) items: ``(n_targets,)`` float64, ``(n_targets,)`` int64, scalar int64."""
    _check_groups(bias, target, direction, n_targets)
    kept = ~torch.isnan(bias)
    signed = (bias.double() * direction.double())[kept]
    sums = torch.zeros(n_targets, dtype=torch.float64, device=bias.device).index_add_(0, target[kept], signed)
    counts = torch.bincount(target[kept], minlength=n_targets).long()
    return sums, counts, (~kept).sum().long()


def _counterbias_compute(sums: Tensor, counts: Tensor) -> Tensor:
    """Eq. 7 per target: ``sums / counts``, NaN for a target with no item."""
    return torch.where(counts > 0, sums / counts.clamp(min=1), torch.nan)


def dataset_bias(bias: Tensor, target: Tensor, direction: Tensor, n_targets: int) -> tuple[Tensor, Tensor]:
    """Eq. 7: per-target mean of ``direction * bias`` over the items kept (not NaN).

    Args:
        bias: ``(N,)`` instance bias (Eq. 6, 9, 11 or 13), NaN for excluded items.
        target: ``(N,)`` index of each item's target concept.
        direction: ``(N,)`` +1 where the item's bias concept is B0, -1 where it is B1.
        n_targets: number of target concepts.

    Returns:
        ``(n_targets,)`` float64 dataset-level bias (NaN for a target without items) and
        ``(n_targets,)`` item counts.
    """
    sums, counts, _ = _counterbias_update(bias, target, direction, n_targets)
    return _counterbias_compute(sums, counts), counts


def mean_absolute_bias(per_target: Tensor, percent: bool = True) -> Tensor:
    """Table 2: the mean over targets (with items) of ``|bias(T)|``, in percent when ``percent``.

    Example:
        >>> mean_absolute_bias(torch.tensor([0.1, -0.3, float("nan")]))
        tensor(20.)
    """
    present = per_target[~torch.isnan(per_target)]
    if present.numel() == 0:
        return torch.tensor(torch.nan, dtype=per_target.dtype)
    return present.abs().mean() * (100.0 if percent else 1.0)

r"""Adjusted p-values for a family of tests (e.g. all WEAT tests of one model).

With the p-values sorted ascending, :math:`p_{(1)} \le \dots \le p_{(m)}`:

.. math::
    \text{Holm (1979), FWER:}\quad \tilde p_{(i)} = \max_{j \le i} \min\{1, (m - j + 1)\, p_{(j)}\}

    \text{Benjamini–Hochberg (1995), FDR:}\quad \tilde p_{(i)} = \min_{j \ge i} \min\{1, \tfrac{m}{j}\, p_{(j)}\}

Both are monotone in the sorted order and clipped to 1; results come back in the input order. Reject
hypothesis i at level :math:`\alpha` when :math:`\tilde p_i \le \alpha`.

Example:
    >>> holm_bonferroni(torch.tensor([0.01, 0.04, 0.03]))
    tensor([0.0300, 0.0600, 0.0600])
    >>> benjamini_hochberg(torch.tensor([0.01, 0.04, 0.03]))
    tensor([0.0300, 0.0400, 0.0400])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from vlbias.errors import InputError


def _check_p_values(p_values: Tensor | Sequence[float]) -> Tensor:
    p_values = torch.as_tensor(p_values)
    if p_values.ndim != 1:
        raise InputError(f"Expected argument `p_values` to be a 1-D sequence but got shape {tuple(p_values.shape)}")
    if not p_values.is_floating_point():
        p_values = p_values.to(torch.float64)
    outside = int((~((p_values >= 0) & (p_values <= 1))).sum())  # also catches NaN
    if outside:
        raise InputError(f"Expected p-values in [0, 1] but {outside} of {p_values.numel()} are outside it or NaN")
    return p_values


def _in_input_order(p_values: Tensor | Sequence[float], adjust_sorted: Callable[[Tensor], Tensor]) -> Tensor:
    """``adjust_sorted`` of the checked p-values sorted ascending, put back in the input order: ``(m,)`` in the
    floating dtype of the input (float64 for other input)."""
    p_values = _check_p_values(p_values)
    order = p_values.argsort()
    return torch.empty_like(p_values).scatter_(0, order, adjust_sorted(p_values[order]))


def _holm_sorted(sorted_p: Tensor) -> Tensor:
    multipliers = torch.arange(sorted_p.numel(), 0, -1, dtype=sorted_p.dtype)  # m, m-1, ..., 1
    return torch.cummax(multipliers * sorted_p, dim=0).values.clamp(max=1)


def _benjamini_hochberg_sorted(sorted_p: Tensor) -> Tensor:
    m = sorted_p.numel()
    scaled = sorted_p * m / torch.arange(1, m + 1, dtype=sorted_p.dtype)
    return scaled.flip(0).cummin(dim=0).values.flip(0).clamp(max=1)


def holm_bonferroni(p_values: Tensor | Sequence[float]) -> Tensor:
    """Holm's step-down adjusted p-values (controls the family-wise error rate), in the input order.

    Args:
        p_values: ``(m,)`` p-values in [0, 1]; a list is accepted.

    Returns:
        ``(m,)`` adjusted p-values (floating dtype of the input, float64 for other input).
    """
    return _in_input_order(p_values, _holm_sorted)


def benjamini_hochberg(p_values: Tensor | Sequence[float]) -> Tensor:
    """Benjamini–Hochberg step-up adjusted p-values (controls the false discovery rate under independence or
    positive dependence), in the input order; argument and result as :func:`holm_bonferroni`."""
    return _in_input_order(p_values, _benjamini_hochberg_sorted)


def add_adjusted(results: dict[str, Tensor], family: Sequence[str]) -> None:
    """For the tests ``family`` (keys of ``results`` whose ``<key>/p_value`` is set), add ``<key>/p_holm`` and
    ``<key>/p_bh``: the p-values adjusted over the family (:func:`holm_bonferroni`, :func:`benjamini_hochberg`),
    float64; nothing for an empty family.

    Example:
        >>> results = {"a/p_value": torch.tensor(0.01), "b/p_value": torch.tensor(0.04)}
        >>> add_adjusted(results, ["a", "b"])
        >>> round(float(results["a/p_holm"]), 4), round(float(results["b/p_bh"]), 4)
        (0.02, 0.04)
    """
    if not family:
        return
    p_values = torch.stack([results[f"{key}/p_value"] for key in family])
    for suffix, adjust in (("p_holm", holm_bonferroni), ("p_bh", benjamini_hochberg)):
        for key, value in zip(family, adjust(p_values), strict=True):
            results[f"{key}/{suffix}"] = value.double()

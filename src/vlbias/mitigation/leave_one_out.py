r"""Cross-modal effect size with one embedding dimension left out, for every dimension at once.

MMBias (Janghorbani & de Melo, 2023, Algorithm 1) scores each dimension :math:`k` by the bias
:math:`\psi_k` that remains once :math:`k` is removed from image and text embeddings. Removing a
coordinate and re-normalising changes every cosine in closed form:

.. math::
    \cos_{-k}(u, v) = \frac{u \cdot v - u_k v_k}{\sqrt{|u|^2 - u_k^2}\,\sqrt{|v|^2 - v_k^2}}

so the association of target :math:`w` (MMBias Eq. 1, :math:`\phi`) without :math:`k` is

.. math::
    s_{-k}(w, A, B) = \operatorname{mean}_{a} \cos_{-k}(w, a) - \operatorname{mean}_{b} \cos_{-k}(w, b),
    \qquad
    \operatorname{mean}_{a} \cos_{-k}(w, a) = \frac{r_{wk}}{|A|}
        \Big(\sum_a (w \cdot a)\, r_{ak} - w_k \sum_a a_k r_{ak}\Big)

with :math:`r_{uk} = (|u|^2 - u_k^2)^{-1/2}`: two matrix products give all
:math:`n \times D` associations, :math:`O(nmD)` work instead of :math:`O(nmD^2)` for recomputing the
cosines once per dimension. The effect size :math:`d_{-k}` (MMBias Eq. 1; sample std, as
:func:`~vlbias.metrics.functional.weat.effect_size_from_associations`) follows column by column.

A dimension that is a vector's only nonzero coordinate leaves it a zero vector, whose cosine is
undefined: its :math:`d_{-k}` is NaN.

Example:
    >>> x = torch.tensor([[1.0, 0.0, 0.2], [0.9, 0.1, 0.3]]); y = torch.tensor([[0.0, 1.0, 0.2], [0.1, 0.9, 0.1]])
    >>> a = torch.tensor([[1.0, 0.0, 0.1]]); b = torch.tensor([[0.0, 1.0, 0.1]])
    >>> loo = leave_one_out_effect_sizes(x, y, a, b)
    >>> torch.allclose(loo, torch.stack([effect_size_without(x, y, a, b, torch.tensor([k])) for k in range(3)]))
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.checks import check_embeddings, check_same_dim
from vlbias.metrics.functional.weat import effect_size_from_associations, weat_association
from vlbias.models.families.pruned import checked_dimensions


def checked_sets(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The four sets as float64, refused unless 2-D, non-empty, finite, nonzero and of one dimension,
    with at least two targets in X ∪ Y (the effect size divides by their sample std)."""
    sets = {name: check_embeddings(name, value) for name, value in zip("xyab", (x, y, a, b))}
    check_same_dim(**sets)
    if x.shape[0] + y.shape[0] < 2:
        raise InputError(
            f"Expected at least 2 targets in X ∪ Y (sample std) but got |X| + |Y| = {x.shape[0] + y.shape[0]}"
        )
    return tuple(value.to(torch.float64) for value in sets.values())


def leave_one_out_effect_sizes(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> Tensor:
    r"""Effect size :math:`d_{-k}` of MMBias Eq. 1 with dimension ``k`` removed from every embedding, for all ``k``.

    Args:
        x: target images X, ``(n_x, D)``; need not be normalised.
        y: target images Y, ``(n_y, D)``.
        a: attribute texts A, ``(m_a, D)``.
        b: attribute texts B, ``(m_b, D)``.

    Returns:
        ``(D,)`` float64; entry ``k`` equals ``effect_size_without(x, y, a, b, torch.tensor([k]))``.
    """
    return leave_one_out_unchecked(*checked_sets(x, y, a, b))


def leave_one_out_unchecked(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> Tensor:
    r""":func:`leave_one_out_effect_sizes` of sets already passed through :func:`checked_sets`.

    A and B enter as one set with weights :math:`+1/|A|` and :math:`-1/|B|`, so that
    :math:`s_{-k}(w) = r_{wk} (\sum_t c_t (w \cdot t) r_{tk} - w_k \sum_t c_t t_k r_{tk})`: one product
    ``(n, m) @ (m, D)``.
    """
    w, t = torch.cat([x, y]), torch.cat([a, b])
    weights = torch.cat([a.new_full((a.shape[0], 1), 1 / a.shape[0]), b.new_full((b.shape[0], 1), -1 / b.shape[0])])
    r_w = (w.square().sum(1, keepdim=True) - w.square()).rsqrt()  # (n, D)
    c_t = weights * (t.square().sum(1, keepdim=True) - t.square()).rsqrt()  # (m, D)
    s = r_w * ((w @ t.T) @ c_t - w * (t * c_t).sum(0))  # (n, D)
    s_x, s_y = s[: x.shape[0]], s[x.shape[0] :]
    centred = s - s.mean(0)
    std = (centred.square().sum(0) / (s.shape[0] - 1)).sqrt()  # sample std; faster than Tensor.std over dim 0
    return (s_x.mean(0) - s_y.mean(0)) / std


def effect_size_unchecked(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """MMBias Eq. 1 of sets already passed through :func:`checked_sets` (no per-call input checks)."""
    x, y, a, b = (F.normalize(m, dim=1) for m in (x, y, a, b))
    w = torch.cat([x, y])
    s = (w @ a.T).mean(1) - (w @ b.T).mean(1)
    return (s[: x.shape[0]].mean() - s[x.shape[0] :].mean()) / s.std(correction=1)


def effect_size_without(x: Tensor, y: Tensor, a: Tensor, b: Tensor, removed: Tensor) -> Tensor:
    """Effect size of MMBias Eq. 1 recomputed from scratch on the dimensions not in ``removed``
    (drop them, re-normalise, recompute every cosine): the reference for
    :func:`leave_one_out_effect_sizes`, and the naive step of Algorithm 1.

    Args:
        x, y, a, b: as in :func:`leave_one_out_effect_sizes`.
        removed: 1-D integer tensor of distinct dimensions in ``[0, D)``; empty keeps them all.

    Returns:
        float64 scalar.
    """
    x, y, a, b = checked_sets(x, y, a, b)
    kept = kept_dimensions(removed, x.shape[1])
    x, y, a, b = (m[:, kept] for m in (x, y, a, b))
    return effect_size_from_associations(weat_association(x, a, b), weat_association(y, a, b))


def kept_dimensions(removed: Tensor, dim: int) -> Tensor:
    """The dimensions of ``range(dim)`` not in ``removed``, ascending; refuses repeats, out-of-range
    values and removing every dimension."""
    removed = checked_dimensions(removed, dim, "removed")
    if removed.numel() >= dim:
        raise InputError(f"Expected to keep at least one of the {dim} dimensions but all are removed")
    keep = torch.ones(dim, dtype=torch.bool)
    keep[removed.long()] = False
    return keep.nonzero().squeeze(1)

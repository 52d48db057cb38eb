r"""Position preference of a multiple-choice answerer: which *displayed* position it picks when the same item is shown
in every cyclic order of its options (the rotations of :mod:`vlbias.suites.bias_qa`).

Rotation :math:`r` of an item with :math:`O` options shows, at position :math:`p`, original option
:math:`(p + r) \bmod O`. From the position chosen at each (item, rotation), with :math:`R` the number of rotations
shown over all items,

.. math::

    \text{share}_p = \frac{\#\{\text{choices at } p\}}{R}, \qquad
    \text{expected}_p = \frac{1}{R} \sum_{(i, r)} \frac{[p < O_i]}{O_i}, \qquad
    \text{max\_deviation} = \max_p \lvert \text{share}_p - \text{expected}_p \rvert,

the share an answerer blind to position would have at :math:`p` being :math:`\text{expected}_p` (:math:`1/O` when
every item has :math:`O` options). ``change_rate`` is the share of items whose chosen original option is not the
same in all their rotations: 0 for an answerer that reads the content only, 1 when the order decides every item.
Undefined (NaN, never 0) without items.

Example:
    >>> positions = torch.tensor([[0, 0, 0], [0, 2, 1]])  # item 0: always position 0; item 1: always option 0
    >>> result = position_preference(positions, torch.tensor([3, 3]), max_options=3)
    >>> result["share"].tolist(), round(float(result["max_deviation"]), 4), float(result["change_rate"])
    ([0.6666666666666666, 0.16666666666666666, 0.16666666666666666], 0.3333, 0.5)
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import InputError


def position_counts(positions: Tensor, n_options: Tensor, max_options: int) -> dict[str, Tensor]:
    """The sums :func:`position_shares` reads, float64: ``chosen`` ``(max_options,)`` choices at each position,
    ``expected`` ``(max_options,)`` the sum over (item, rotation) of ``[p < O] / O``, ``rotations``, ``items`` and
    ``changed`` (items whose chosen original option differs between rotations).

    ``positions`` ``(N, max_options)``: the position chosen in each rotation of each item, ``-1`` past the item's
    ``n_options`` ``(N,)`` rotations."""
    positions, n_options = torch.as_tensor(positions), torch.as_tensor(n_options)
    if positions.ndim != 2 or positions.shape != (len(n_options), max_options) or positions.is_floating_point():
        raise InputError(
            f"Expected argument `positions` to be integers of shape ({len(n_options)}, {max_options}) but got "
            f"{positions.dtype} {tuple(positions.shape)}."
        )
    if len(n_options) and (n_options.min() < 2 or n_options.max() > max_options):
        raise InputError(f"Expected argument `n_options` in [2, {max_options}] but got {n_options.unique().tolist()}.")
    rotation = torch.arange(max_options)[None]
    shown = rotation < n_options[:, None]  # (N, max_options): rotation r of item i was shown
    if bool(((positions < 0) | (positions >= n_options[:, None]))[shown].any()) or bool(
        (positions != -1)[~shown].any()
    ):
        raise InputError(
            "Expected argument `positions` in [0, n_options) for each shown rotation and -1 past the item's "
            f"n_options, but got {positions.tolist()[:5]}."
        )
    chosen = torch.zeros(max_options, dtype=torch.float64)
    chosen.index_add_(0, positions[shown], torch.ones(int(shown.sum()), dtype=torch.float64))
    expected = shown.double().sum(dim=0)  # an item's O rotations add O · [p < O] / O = [p < O]
    original = torch.where(shown, (positions + rotation) % n_options[:, None], -1)
    changed = ((original != original[:, :1]) & shown).any(dim=1)
    return {
        "chosen": chosen,
        "expected": expected,
        "rotations": shown.sum().double(),
        "items": torch.tensor(float(len(n_options)), dtype=torch.float64),
        "changed": changed.sum().double(),
    }


def position_shares(counts: dict[str, Tensor]) -> dict[str, Tensor]:
    """``share``, ``expected`` ``(P,)``, ``max_deviation`` and ``change_rate`` (module docstring) from
    :func:`position_counts` (or their sums over batches and ranks), float64; NaN without items."""
    rotations, items = counts["rotations"], counts["items"]
    share, expected = counts["chosen"] / rotations, counts["expected"] / rotations
    return {
        "share": share,
        "expected": expected,
        "max_deviation": (share - expected).abs().max(),
        "change_rate": counts["changed"] / items,
        "n_items": items,
        "n_rotations": rotations,
    }


def position_preference(positions: Tensor, n_options: Tensor, max_options: int) -> dict[str, Tensor]:
    """:func:`position_shares` of the chosen ``positions`` (:func:`position_counts`)."""
    return position_shares(position_counts(positions, n_options, max_options))

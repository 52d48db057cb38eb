"""Position preference of a multiple-choice answerer as a ``torchmetrics`` metric; the formulas are
:mod:`vlbias.metrics.functional.position`'s. Its states are ``"sum"`` counts: one process and N processes give the
same numbers."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics.functional.position import position_counts, position_shares


class PositionPreference(Metric):
    """The share of choices at each displayed position against a position-blind answerer's, the largest deviation,
    and the share of items whose choice changes with the order of their options.

    ``update(positions, n_options)`` takes ``(N, max_options)`` chosen positions, one per rotation of each item
    (``-1`` past the item's ``n_options``), and each item's number of options ``(N,)``. ``compute()`` returns the
    float64 tensors of :func:`~vlbias.metrics.functional.position.position_shares`.

    Args:
        max_options: the most options an item has (positions ``0 .. max_options - 1``).

    Example:
        >>> metric = PositionPreference(max_options=3)
        >>> metric.update(torch.tensor([[0, 0, 0], [0, 2, 1]]), torch.tensor([3, 3]))
        >>> float(metric.compute()["change_rate"])
        0.5
    """

    is_differentiable = False
    higher_is_better = False  # max_deviation and change_rate: 0 is no position effect
    full_state_update = False

    def __init__(self, max_options: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(max_options, bool) or not isinstance(max_options, int) or max_options < 2:
            raise InputError(f"Expected argument `max_options` to be an integer of at least 2 but got {max_options!r}.")
        self.max_options = max_options
        self.add_state("chosen", default=torch.zeros(max_options, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("expected", default=torch.zeros(max_options, dtype=torch.float64), dist_reduce_fx="sum")
        for name in ("rotations", "items", "changed"):
            self.add_state(name, default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, positions: Tensor, n_options: Tensor) -> None:
        counts = position_counts(positions, n_options, self.max_options)
        for name, value in counts.items():
            setattr(self, name, getattr(self, name) + value)

    def compute(self) -> dict[str, Tensor]:
        names = ("chosen", "expected", "rotations", "items", "changed")
        return position_shares({name: getattr(self, name) for name in names})

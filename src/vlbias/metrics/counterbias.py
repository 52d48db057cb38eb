r"""CounterBias dataset-level bias (Zhang et al., 2022, Eq. 7) and its Table 2 summary as a
``torchmetrics`` metric.

The formulas live in :mod:`vlbias.metrics.functional.counterbias`; this class only sums what
Eq. 7 needs (per-target sums of the signed instance bias and item counts, and the number of
excluded items), so its states reduce with ``"sum"`` and 1 or N processes give the same result.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import ConfigError
from vlbias.metrics.functional.counterbias import (
    _counterbias_compute,
    _counterbias_update,
    mean_absolute_bias,
)


class CounterBiasScore(Metric):
    r"""Dataset-level counterfactual bias per target concept (Eq. 7) and the mean absolute bias
    over targets (Table 2).

    .. math::
        \text{bias}(T) = \mathbb{E}_{S_T}\bigl[\mathbb{1}_{B=B_0}\,\text{bias}(T, B)
                                              - \mathbb{1}_{B=B_1}\,\text{bias}(T, B)\bigr]

    As input to ``update``:

    - ``bias`` (:class:`~torch.Tensor`): ``(N,)`` instance bias (Eq. 6, 9, 11 or 13), NaN for an
      item excluded for a too-small bias-probability change
    - ``target`` (:class:`~torch.Tensor`): ``(N,)`` long, each item's target concept index
    - ``direction`` (:class:`~torch.Tensor`): ``(N,)`` +1 where the item's bias concept is B0, -1 for B1

    As output of ``compute``, a dict:

    - ``per_target``: ``(n_targets,)`` float64 bias(T), NaN for a target without items
    - ``count``: ``(n_targets,)`` items per target
    - ``mean_absolute``: mean over targets of ``|bias(T)|`` (in percent when ``percent``)
    - ``n_excluded``: items excluded (NaN bias)

    Args:
        n_targets: number of target concepts.
        percent: report ``mean_absolute`` in percent (Table 2) or as a plain number (Table 3).
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = CounterBiasScore(n_targets=2)
        >>> metric.update(torch.tensor([0.2, 0.1, float("nan")]), torch.tensor([0, 0, 1]), torch.tensor([1, -1, 1]))
        >>> metric.update(torch.tensor([-0.4]), torch.tensor([1]), torch.tensor([1]))
        >>> out = metric.compute()
        >>> out["per_target"], out["mean_absolute"], int(out["n_excluded"])
        (tensor([ 0.0500, -0.4000], dtype=torch.float64), tensor(22.5000, dtype=torch.float64), 1)
    """

    is_differentiable: bool = False
    higher_is_better: bool | None = None  # signed per target; closer to 0 is fairer
    full_state_update: bool = False

    sums: Tensor
    counts: Tensor
    n_excluded: Tensor

    def __init__(self, n_targets: int, percent: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(n_targets, bool) or not isinstance(n_targets, int) or n_targets < 1:
            raise ConfigError(f"Expected argument `n_targets` to be a positive integer but got {n_targets!r}")
        self.n_targets, self.percent = n_targets, percent
        self.add_state("sums", default=torch.zeros(n_targets, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("counts", default=torch.zeros(n_targets, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("n_excluded", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, bias: Tensor, target: Tensor, direction: Tensor) -> None:
        """Add ``N`` items' instance bias with their target indices and bias directions."""
        sums, counts, excluded = _counterbias_update(bias, target.to(self.device), direction.to(self.device), self.n_targets)
        self.sums += sums.to(self.sums.device)
        self.counts += counts.to(self.counts.device)
        self.n_excluded += excluded.to(self.n_excluded.device)

    def compute(self) -> dict[str, Tensor]:
        """bias(T) per target, counts, the mean absolute bias and the number excluded."""
        per_target = _counterbias_compute(self.sums, self.counts)
        return {
            "per_target": per_target,
            "count": self.counts.clone(),
            "mean_absolute": mean_absolute_bias(per_target, self.percent),
            "n_excluded": self.n_excluded.clone(),
        }

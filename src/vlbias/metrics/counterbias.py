r"""CounterBias dataset-level bias (Zhang et al., 2022, Eq. 7) and its Table 2 summary as
``torchmetrics`` metrics.

The formulas live in :mod:`vlbias.metrics.functional.counterbias` and
:mod:`~vlbias.metrics.functional.counterbias_uncertainty`. :class:`CounterBiasScore` only sums what
Eq. 7 needs (per-target sums of the signed instance bias and item counts, and the number of
excluded items), so its states reduce with ``"sum"``; :class:`CounterBiasUncertainty` keeps every
item for its intervals and p-values (``"cat"``). 1 or N processes give the same result.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_bootstrap, check_int
from vlbias.metrics.functional.counterbias import (
    _counterbias_compute,
    _counterbias_update,
    mean_absolute_bias,
)
from vlbias.metrics.functional.counterbias_uncertainty import (
    _checked,
    counterbias_intervals,
    counterbias_p_values,
)
from vlbias.options import DEFAULT_STATISTICS


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
        check_int("n_targets", n_targets)
        self.n_targets, self.percent = n_targets, percent
        self.add_state("sums", default=torch.zeros(n_targets, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("counts", default=torch.zeros(n_targets, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("n_excluded", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, bias: Tensor, target: Tensor, direction: Tensor) -> None:
        """Add ``N`` items' instance bias with their target indices and bias directions."""
        sums, counts, excluded = _counterbias_update(
            bias, target.to(self.device), direction.to(self.device), self.n_targets
        )
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


class CounterBiasUncertainty(TypedListStates, Metric):
    r"""Bootstrap intervals and sign-flip p-values of the dataset-level bias per target (Eq. 7) and of
    Table 2's mean absolute bias, over ``K`` caption templates
    (:mod:`vlbias.metrics.functional.counterbias_uncertainty`).

    Unlike :class:`CounterBiasScore` it keeps every item (``"cat"`` states), since a resample needs them.

    As input to ``update``:

    - ``bias`` (:class:`~torch.Tensor`): ``(N, K)`` instance bias per item and template, NaN where excluded
    - ``target`` (:class:`~torch.Tensor`): ``(N,)`` long, each item's target concept index
    - ``direction`` (:class:`~torch.Tensor`): ``(N,)`` +1 where the item's bias concept is B0, -1 for B1

    As output of ``compute``, a dict: ``per_target`` ``(n_targets, 2)``, ``mean_absolute`` ``(K, 2)``,
    ``mean_absolute_avg`` ``(2,)`` (intervals ``[low, high]``) and ``p_value`` ``(n_targets,)``.

    Args:
        n_targets: number of target concepts.
        n_templates: ``K``.
        percent: Table 2 in percent (``False``: plain, as Table 3).
        n_bootstrap: resamples for the intervals.
        n_permutations: sign flips for the p-values (all of them when there are fewer).
        confidence: interval coverage.
        seed: seed of the resamples and flips.
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = CounterBiasUncertainty(n_targets=2, n_templates=1)
        >>> metric.update(torch.tensor([[0.1], [0.2]]), torch.tensor([0, 0]), torch.tensor([1, 1]))
        >>> metric.update(torch.tensor([[-0.3]]), torch.tensor([0]), torch.tensor([-1]))
        >>> metric.compute()["p_value"]  # signed 0.1, 0.2, 0.3: 2 of the 8 flips reach |0.2|; target 1 unseen
        tensor([0.2500,    nan], dtype=torch.float64)
    """

    is_differentiable: bool = False
    higher_is_better: bool | None = None
    full_state_update: bool = False

    def __init__(
        self,
        n_targets: int,
        n_templates: int,
        percent: bool = True,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        n_permutations: int = DEFAULT_STATISTICS.n_permutations,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (("n_targets", n_targets), ("n_templates", n_templates), ("n_permutations", n_permutations)):
            check_int(name, value)
        check_bootstrap(n_bootstrap, confidence)
        self.n_targets, self.n_templates, self.percent = n_targets, n_templates, percent
        self.n_bootstrap, self.n_permutations, self.confidence, self.seed = (
            n_bootstrap,
            n_permutations,
            confidence,
            seed,
        )
        self.list_state_specs = (
            ("bias", torch.float64, (n_templates,)),
            ("target", torch.int64, ()),
            ("direction", torch.int64, ()),
        )
        self.add_state("bias", default=[], dist_reduce_fx="cat")
        self.add_state("target", default=[], dist_reduce_fx="cat")
        self.add_state("direction", default=[], dist_reduce_fx="cat")

    def update(self, bias: Tensor, target: Tensor, direction: Tensor) -> None:
        """Add ``N`` items' biases under each template, with their target indices and bias directions."""
        if bias.ndim != 2 or bias.shape[1] != self.n_templates:
            raise InputError(f"Expected argument `bias` of shape (N, {self.n_templates}) but got {tuple(bias.shape)}")
        _checked(bias, target, direction, self.n_targets)
        self.bias.append(bias.double())
        self.target.append(target.long())
        self.direction.append(direction.long())

    def compute(self) -> dict[str, Tensor]:
        """Intervals and p-values of everything seen (NaN where a target had no item)."""
        bias, target, direction = (self.list_state(name).cpu() for name in ("bias", "target", "direction"))
        intervals = counterbias_intervals(
            bias, target, direction, self.n_targets, self.percent, self.n_bootstrap, self.confidence, self.seed
        )
        p_value = counterbias_p_values(bias, target, direction, self.n_targets, self.n_permutations, self.seed)
        return {**intervals, "p_value": p_value}

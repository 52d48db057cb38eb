r"""Group fairness of zero-shot classification as a ``torchmetrics`` metric whose images may be sharded over ranks.

The formulas live in :mod:`vlbias.metrics.functional.group_fairness` and its intervals in
:mod:`vlbias.metrics.functional.group_fairness_intervals`. Every statistic and its bootstrap interval is a function
of the confusion counts per group :math:`N_{gcp}`, so the only state is that ``(G, C, C)`` tensor of counts, summed
over batches and processes (``dist_reduce_fx="sum"``): 1 and N processes, and any split of the images into
batches, give exactly the numbers of the functional on all the images at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.metrics.functional.bootstrap import IntervalMethod
from vlbias.metrics.functional.checks import check_bootstrap, check_interval_method
from vlbias.metrics.functional.group_fairness import (
    UndefinedRates,
    _cell_ids,
    _check_groups_filled,
    _check_harmful_classes,
    _check_sizes,
    _check_undefined_rates,
    _fairness_from_confusion,
    undefined_rate_counts,
)
from vlbias.metrics.functional.group_fairness_intervals import _intervals_from_confusion
from vlbias.options import DEFAULT_STATISTICS


class GroupFairness(Metric):
    r"""Accuracy per group, worst-group accuracy and its gap, equal-opportunity gap, demographic-parity and
    equalized-odds differences (one class versus the rest) and the CLIP paper's harmful-label rate, with stratified
    bootstrap intervals; see :mod:`vlbias.metrics.functional.group_fairness` for the formulas and conventions.

    As input to ``update``:

    - ``preds`` (:class:`~torch.Tensor`): ``(n,)`` predicted class ids in ``[0, num_classes)``
    - ``target`` (:class:`~torch.Tensor`): ``(n,)`` true class ids in ``[0, num_classes)``
    - ``groups`` (:class:`~torch.Tensor`): ``(n,)`` group ids in ``[0, num_groups)``
      (:func:`~vlbias.metrics.functional.group_fairness.intersectional_groups` combines several attributes)

    As output of ``compute``: the dict of :func:`~vlbias.metrics.functional.group_fairness.group_fairness`
    (``accuracy``, ``group_accuracy``, ``worst_group_accuracy``, ``worst_group_gap``, ``equal_opportunity_gap``
    with ``_mean`` and ``_max``, ... , ``group_size``), and for each statistic but ``group_size`` its interval
    ``<name>_interval`` (``[low, high]`` in a last dimension of 2; from
    :func:`~vlbias.metrics.functional.group_fairness_intervals.group_fairness_intervals`), with the counts of
    :func:`~vlbias.metrics.functional.group_fairness.undefined_rate_counts`. Every group must have
    been seen by then. Call ``update`` and then ``compute``: ``forward``'s per-batch value would need every group in
    each batch and bootstrap each batch.

    Args:
        num_classes: :math:`C \ge 2` classes.
        num_groups: :math:`G \ge 2` groups.
        harmful_classes: class ids whose share per group is ``harmful_label_rate`` (Radford et al., 2021,
            Sec. 7.1); ``None`` leaves it out.
        n_bootstrap: bootstrap replicates for the intervals.
        confidence: coverage of the intervals.
        seed: seed of the bootstrap's generator (drawn in ``compute``, after the sync: every rank gets the same
            intervals).
        interval_method: ``"bca"`` or ``"percentile"``.
        undefined_rates: ``"leave_out"`` (default) or ``"zero"`` (fairlearn's convention): what a TPR or FPR no
            image of a group defines is (:mod:`vlbias.metrics.functional.group_fairness`).
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = GroupFairness(num_classes=3, num_groups=2, harmful_classes=[2], n_bootstrap=200)
        >>> metric.update(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]), torch.tensor([0, 0, 0]))
        >>> metric.update(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]), torch.tensor([1, 1, 1]))
        >>> out = metric.compute()
        >>> out["group_accuracy"], out["harmful_label_rate"]
        (tensor([0.6667, 0.6667], dtype=torch.float64), tensor([0.3333, 0.0000], dtype=torch.float64))
        >>> out["equal_opportunity_gap_max"], out["equal_opportunity_gap_interval"].shape
        (tensor(0., dtype=torch.float64), torch.Size([3, 2]))
    """

    is_differentiable: bool = False
    higher_is_better: bool | None = None  # accuracies: higher is better; gaps, differences and rates: lower
    full_state_update: bool = False

    confusion: Tensor

    def __init__(
        self,
        num_classes: int,
        num_groups: int,
        harmful_classes: Sequence[int] | None = None,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        interval_method: IntervalMethod = DEFAULT_STATISTICS.interval_method,
        undefined_rates: UndefinedRates = "leave_out",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _check_sizes(num_classes, num_groups)
        self.harmful_classes = None if harmful_classes is None else _check_harmful_classes(harmful_classes, num_classes)
        check_bootstrap(n_bootstrap, confidence)
        check_interval_method(interval_method, "interval_method")
        _check_undefined_rates(undefined_rates)
        self.undefined_rates = undefined_rates
        self.num_classes, self.num_groups = num_classes, num_groups
        self.n_bootstrap, self.confidence, self.seed = n_bootstrap, confidence, seed
        self.interval_method = interval_method
        self.add_state(
            "confusion",
            default=torch.zeros(num_groups, num_classes, num_classes, dtype=torch.int64),
            dist_reduce_fx="sum",
        )

    def update(self, preds: Tensor, target: Tensor, groups: Tensor) -> None:
        """Count the ``n`` images' cells (group, true class, predicted class)."""
        cells = _cell_ids(preds, target, groups, self.num_classes, self.num_groups).to(self.confusion.device)
        self.confusion += torch.bincount(cells, minlength=self.confusion.numel()).reshape(self.confusion.shape)

    def compute(self) -> dict[str, Tensor]:
        """Every statistic and its interval over the images seen since the last ``reset``."""
        confusion = self.confusion.cpu()
        _check_groups_filled(confusion)
        out = _fairness_from_confusion(confusion, self.harmful_classes, self.undefined_rates)
        intervals = _intervals_from_confusion(
            confusion,
            self.harmful_classes,
            self.n_bootstrap,
            self.confidence,
            self.seed,
            self.interval_method,
            self.undefined_rates,
        )
        out.update({f"{name}_interval": interval for name, interval in intervals.items()})
        out["group_size"] = confusion.sum(dim=(-1, -2))
        return out | undefined_rate_counts(confusion)

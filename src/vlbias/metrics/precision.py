"""Precision@K of retrieval as a ``torchmetrics`` metric whose queries may be sharded over ranks; the formula is in
:mod:`vlbias.metrics.functional.precision`. ``update`` keeps one value per query in a ``"cat"`` state; ``compute``
draws the bootstrap from a generator seeded after the sync (the values sorted first), so sharded queries give the
numbers of one process."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_bootstrap
from vlbias.metrics.functional.precision import _precision_compute, per_query_precision
from vlbias.options import DEFAULT_STATISTICS


class PrecisionAtK(TypedListStates, Metric):
    r"""Precision@K, the share of each query's top K images relevant to it, averaged over queries with a percentile
    bootstrap interval; see :func:`~vlbias.metrics.functional.precision.precision_at_k`.

    As input to ``update``:

    - ``scores`` (:class:`~torch.Tensor`): ``(b, n_images)`` scores of ``b`` queries over the whole gallery
    - ``relevant`` (:class:`~torch.Tensor`): ``(b, n_images)`` bool, whether each image is relevant to each query

    As output of ``compute``: float64 ``precision``, ``precision_interval`` ``[low, high]`` and int64 ``n_queries``.

    Args:
        k: the cut-off K.
        n_bootstrap: bootstrap replicates over queries.
        confidence: coverage of the interval.
        seed: seed of the bootstrap.
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = PrecisionAtK(k=2, n_bootstrap=100)
        >>> metric.update(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[True, True, False]]))
        >>> metric.update(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[True, True, False]]))
        >>> metric.compute()["precision"]  # (2/2 + 1/2) / 2
        tensor(0.7500, dtype=torch.float64)
    """

    is_differentiable: bool = False
    higher_is_better: bool = True
    full_state_update: bool = False
    list_state_specs = (("precision", torch.float64, ()),)

    precision: list[Tensor]

    def __init__(
        self,
        k: int,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_bootstrap(n_bootstrap, confidence)
        self.k, self.n_bootstrap, self.confidence, self.seed = k, n_bootstrap, confidence, seed
        self.add_state("precision", default=[], dist_reduce_fx="cat")

    def update(self, scores: Tensor, relevant: Tensor) -> None:
        """Add the Precision@K of the ``b`` queries whose gallery scores are ``scores``."""
        self.precision.append(per_query_precision(scores, relevant, self.k))

    def compute(self) -> dict[str, Tensor]:
        """The mean over every query seen since the last ``reset``, with its bootstrap interval."""
        return _precision_compute(self.list_state("precision"), self.n_bootstrap, self.confidence, self.seed)

r"""Ranking bias of retrieval (MaxSkew@K, MinSkew@K, NDKL@K, Bias@K, KL@K) as a ``torchmetrics`` metric.

The definitions are in :mod:`vlbias.metrics.functional.ranking_bias`. ``update`` reduces the score rows of
some queries to one value per query and statistic, kept in ``"cat"`` states; ``compute`` averages them
and draws the bootstrap from a generator seeded after the sync (the values are sorted first), so queries
sharded over ranks give the numbers of one process.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_bootstrap
from vlbias.metrics.functional.ranking_bias import (
    STATISTICS,
    SkewConventions,
    _check_groups,
    _conventions,
    _ranking_bias_compute,
    _ranking_bias_update,
)
from vlbias.options import DEFAULT_STATISTICS


class RankingBias(TypedListStates, Metric):
    r"""MaxSkew@K and MinSkew@K (Geyik et al., 2019), NDKL@K, Bias@K (Wang et al., 2021) and KL@K of the images
    retrieved for gender-neutral queries, averaged over queries with bootstrap intervals; see
    :func:`~vlbias.metrics.functional.ranking_bias.ranking_bias`, whose conventions it takes; a named set of them
    is ``RankingBias(k, conventions=ranking_protocol(name).conventions)``
    (:func:`~vlbias.metrics.ranking_protocols.ranking_protocol`).

    As input to ``update``:

    - ``scores`` (:class:`~torch.Tensor`): ``(b, n_images)`` scores of ``b`` queries over the whole gallery
    - ``attributes`` (:class:`~torch.Tensor`): ``(n_images,)`` the attribute value of every gallery image

    As output of ``compute``: float64 ``max_skew``, ``min_skew``, ``ndkl``, ``bias``, ``kl``, each with
    ``<name>_interval`` ``[low, high]``, and int64 ``n_queries``.

    Args:
        k: the cut-off K.
        num_attributes: number of attribute values A.
        conventions: desired shares, zero and tie handling, skew form
            (:class:`~vlbias.metrics.functional.ranking_bias.SkewConventions`; default Geyik et al.'s); a
            ``"gallery"`` or ``"present"`` desired share is read from the ``attributes`` of each ``update``.
        groups: attribute values of (men, women) for Bias@K.
        n_bootstrap: bootstrap replicates over queries.
        confidence: coverage of the intervals.
        seed: seed of the bootstrap.
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = RankingBias(k=2, n_bootstrap=100)
        >>> attributes = torch.tensor([0, 0, 1])
        >>> metric.update(torch.tensor([[3.0, 2.0, 1.0]]), attributes)  # top 2: two men
        >>> metric.update(torch.tensor([[1.0, 2.0, 3.0]]), attributes)  # top 2: a woman and a man
        >>> metric.compute()["bias"]
        tensor(0.5000, dtype=torch.float64)
    """

    is_differentiable: bool = False
    higher_is_better: bool | None = None  # 0 is unbiased; the skews and Bias@K are signed
    full_state_update: bool = False
    list_state_specs = tuple((name, torch.float64, ()) for name in STATISTICS)

    max_skew: list[Tensor]
    min_skew: list[Tensor]
    ndkl: list[Tensor]
    bias: list[Tensor]
    kl: list[Tensor]

    def __init__(
        self,
        k: int,
        num_attributes: int = 2,
        conventions: SkewConventions | None = None,
        groups: tuple[int, int] = (0, 1),
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_bootstrap(n_bootstrap, confidence)
        self.k, self.num_attributes = k, num_attributes
        self.conventions = _conventions(conventions, num_attributes)
        self.groups = _check_groups(groups, num_attributes)
        self.n_bootstrap, self.confidence, self.seed = n_bootstrap, confidence, seed
        for name in STATISTICS:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, scores: Tensor, attributes: Tensor) -> None:
        """Add the statistics of the ``b`` queries whose gallery scores are ``scores``."""
        per_query = _ranking_bias_update(scores, attributes, self.k, self.num_attributes, self.conventions, self.groups)
        for name in STATISTICS:
            getattr(self, name).append(per_query[name])

    def compute(self) -> dict[str, Tensor]:
        """Means over every query seen since the last ``reset``, with their bootstrap intervals."""
        per_query = {name: self.list_state(name) for name in STATISTICS}
        return _ranking_bias_compute(per_query, self.n_bootstrap, self.confidence, self.seed)

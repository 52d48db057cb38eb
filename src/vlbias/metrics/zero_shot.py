r"""Zero-shot attribute ranking of one target group as a ``torchmetrics`` metric (MMBias Sec. 5.1.1, Fig. 5).

The formula lives in :mod:`vlbias.metrics.functional.zero_shot`: words are ranked by
:math:`r(G, w) = \operatorname{mean}_{x \in G} \operatorname{score}(x, w)`. The mean needs only the
per-word sum of scores and the image count, so both states are sums and reduce exactly across processes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics.functional.zero_shot import (
    _check_scores,
    _check_top_k,
    ranking_from_mean_scores,
)


class ZeroShotRanking(Metric):
    r"""Top-``top_k`` attribute words of a group's images, by mean image-word score.

    ``update(scores)`` takes ``(batch_images, n_words)`` scores (cosine similarities or match
    probabilities) of some of the group's images against all ``n_words`` attribute words.
    ``compute()`` returns ``(values, indices)``: the ``top_k`` largest mean scores, highest first (ties keep
    the word order), and their word indices.

    Args:
        n_words: number of attribute words (columns of every update).
        top_k: how many words to keep (15 in MMBias).

    Example:
        >>> metric = ZeroShotRanking(n_words=3, top_k=2)
        >>> metric.update(torch.tensor([[0.9, 0.1, 0.5]])); metric.update(torch.tensor([[0.7, 0.3, 0.5]]))
        >>> metric.compute()
        (tensor([0.8000, 0.5000], dtype=torch.float64), tensor([0, 2]))
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False

    def __init__(self, n_words: int, top_k: int = 15, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_top_k(top_k, n_words)
        self.n_words, self.top_k = n_words, top_k
        self.add_state("score_sum", default=torch.zeros(n_words, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("n_images", default=torch.tensor(0, dtype=torch.int64), dist_reduce_fx="sum")

    def update(self, scores: Tensor) -> None:
        scores = _check_scores(scores)
        if scores.shape[1] != self.n_words:
            raise InputError(f"Expected scores with {self.n_words} columns (one per word) but got {scores.shape[1]}")
        self.score_sum += scores.to(torch.float64).sum(dim=0)
        self.n_images += scores.shape[0]

    def compute(self) -> tuple[Tensor, Tensor]:
        if int(self.n_images) == 0:
            raise InputError("ZeroShotRanking.compute() called before any update: the group has no images")
        return ranking_from_mean_scores(self.score_sum / self.n_images, self.top_k)

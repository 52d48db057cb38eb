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
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.zero_shot import (
    _check_scores,
    _check_top_k,
    ranking_from_mean_scores,
    zero_shot_ranking,
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


class CosineZeroShotRanking(TypedListStates, Metric):
    r""":class:`ZeroShotRanking` of cosine scores, from embeddings that may arrive on different ranks: the
    group's image embeddings and the attribute words' embeddings (with their positions in the word list),
    so that neither needs the other at ``update``. ``compute`` forms the ``(n_images, n_words)`` cosines and
    ranks by :func:`~vlbias.metrics.functional.zero_shot.zero_shot_ranking`.

    ``update(images=...)`` takes ``(n, D)`` L2-normalised image embeddings; ``update(words=..., positions=...)``
    takes ``(m, D)`` normalised word embeddings and their ``(m,)`` indices into the word list. Every word
    must have arrived once by ``compute``.

    Args:
        n_words: number of attribute words.
        top_k: how many words to keep (15 in MMBias).

    Example:
        >>> metric = CosineZeroShotRanking(n_words=2, top_k=2)
        >>> metric.update(words=torch.tensor([[0.0, 1.0]]), positions=torch.tensor([1]))
        >>> metric.update(images=torch.tensor([[1.0, 0.0], [0.6, 0.8]]))
        >>> metric.update(words=torch.tensor([[1.0, 0.0]]), positions=torch.tensor([0]))
        >>> metric.compute()
        (tensor([0.8000, 0.4000], dtype=torch.float64), tensor([0, 1]))
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False
    list_state_specs = (("images", torch.float64, ()), ("words", torch.float64, ()), ("positions", torch.int64, ()))

    def __init__(self, n_words: int, top_k: int = 15, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_top_k(top_k, n_words)
        self.n_words, self.top_k = n_words, top_k
        for name in ("images", "words", "positions"):
            self.add_state(name, default=[], dist_reduce_fx="cat")
        self.add_state("embedding_dim", default=torch.tensor(0), dist_reduce_fx="max")

    def update(
        self, images: Tensor | None = None, words: Tensor | None = None, positions: Tensor | None = None
    ) -> None:
        if (words is None) != (positions is None):
            raise InputError("Expected `words` and `positions` together (each word embedding with its index)")
        for name, embeddings in (("images", images), ("words", words)):
            if embeddings is None:
                continue
            if embeddings.ndim != 2:
                raise InputError(f"Expected argument `{name}` of shape (n, D) but got {tuple(embeddings.shape)}")
            self.embedding_dim = torch.tensor(embeddings.shape[1], device=self.device)
            getattr(self, name).append(embeddings.detach().to(torch.float64).flatten())
        if positions is not None:
            if positions.shape != (len(words),):
                raise InputError(f"Expected `positions` of shape ({len(words)},) but got {tuple(positions.shape)}")
            self.positions.append(positions.to(torch.int64))

    def compute(self) -> tuple[Tensor, Tensor]:
        dim = int(self.embedding_dim)
        images, words, positions = (self.list_state(name) for name in ("images", "words", "positions"))
        if images.numel() == 0:
            raise InputError("CosineZeroShotRanking.compute() called before any image: the group has no images")
        if sorted(positions.tolist()) != list(range(self.n_words)):
            raise InputError(
                f"Expected every one of the {self.n_words} words once but got positions {sorted(positions.tolist())}"
            )
        words = words.reshape(-1, dim)[positions.argsort()]
        return zero_shot_ranking(images.reshape(-1, dim) @ words.T, self.top_k)

r"""Zero-shot attribute ranking of a target group (MMBias, Janghorbani & de Melo, 2023, Sec. 5.1.1, Fig. 5).

MMBias classifies each group's images zero-shot against the 120 attribute words (60 pleasant, 60
unpleasant) and shows, per group, "the top 15 classified words" with a number for "the degree to which
the model associates that target class with that word". The paper gives no formula; our reading: the
association of group :math:`G` with word :math:`w` is the mean over the group's images of their
image-word score,

.. math::
    r(G, w) = \operatorname{mean}_{x \in G} \operatorname{score}(x, w),

where the score is :math:`\cos(x, w)` for embedding models (Fig. 5 prints :math:`100 \cos`, CLIP's
logit scale: values around 20) and the match probability :math:`\sigma(x, w)` for fusion models. The
ranking sorts the words by :math:`r(G, w)`, highest first (a stable sort: ties keep the word order), and
keeps the first ``top_k``. The share of pleasant words among them summarises the row ("12 of the 15 top
attributes have positive sentiment", Sec. 5.1.1).

Example:
    >>> scores = torch.tensor([[0.9, 0.1, 0.5], [0.7, 0.3, 0.5]])  # 2 images x 3 words
    >>> values, indices = zero_shot_ranking(scores, top_k=2)
    >>> values, indices
    (tensor([0.8000, 0.5000]), tensor([0, 2]))
    >>> pleasant_share(indices, torch.tensor([True, False, False])).item()
    0.5
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.checks import check_int, shape_or_type


def _check_scores(scores: Tensor) -> Tensor:
    if not isinstance(scores, Tensor) or scores.ndim != 2:
        raise InputError(
            f"Expected argument `scores` to be a 2-D tensor (images, words) but got {shape_or_type(scores)}"
        )
    if 0 in scores.shape:
        raise InputError(f"Expected argument `scores` to be non-empty but got shape {tuple(scores.shape)}")
    bad = int((~torch.isfinite(scores)).sum())
    if bad:
        raise InputError(f"Expected finite scores but {bad} of {scores.numel()} are NaN or inf")
    return scores


def _check_top_k(top_k: int, n_words: int) -> None:
    check_int("top_k", top_k, high=n_words, high_is="the number of words")


def ranking_from_mean_scores(mean_scores: Tensor, top_k: int) -> tuple[Tensor, Tensor]:
    """The ``top_k`` largest of ``(n_words,)`` mean scores and their word indices, highest first (stable)."""
    _check_top_k(top_k, mean_scores.numel())
    order = torch.sort(mean_scores, descending=True, stable=True).indices[:top_k]
    return mean_scores[order], order


def zero_shot_ranking(scores: Tensor, top_k: int = 15) -> tuple[Tensor, Tensor]:
    r"""Top-``top_k`` words of one group by :math:`r(G, w) = \operatorname{mean}_{x \in G}
    \operatorname{score}(x, w)` (MMBias Sec. 5.1.1, Fig. 5).

    Args:
        scores: ``(n_images, n_words)`` image-word scores of the group's images (cosine or match probability).
        top_k: how many words to keep (15 in the paper).

    Returns:
        ``(values, indices)``: ``(top_k,)`` mean scores in the dtype of ``scores``, highest first, and the
        ``(top_k,)`` word indices into the columns of ``scores``.
    """
    scores = _check_scores(scores)
    return ranking_from_mean_scores(scores.mean(dim=0), top_k)


def pleasant_share(indices: Tensor, is_pleasant: Tensor) -> Tensor:
    """Share of the ranked words (``indices`` into the word list) whose entry in the boolean ``(n_words,)``
    mask ``is_pleasant`` is true; a float64 scalar in [0, 1]."""
    if indices.numel() == 0:
        raise InputError("Expected argument `indices` to hold at least one ranked word but it is empty")
    return is_pleasant[indices].to(torch.float64).mean()

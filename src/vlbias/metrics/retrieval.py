r"""Retrieval Recall@K as a ``torchmetrics`` metric whose queries may be sharded over ranks.

The ranks and the recall are defined in :mod:`vlbias.metrics.functional.retrieval`. Each ``update`` turns
the score rows of some queries into their pessimistic ranks; the ranks and query indices are ``"cat"``
states, so every rank may score a different slice of the queries (as ALBEF's evaluation splits them) and
``compute`` gives the numbers of one process. A query seen twice (a ``DistributedSampler`` pads the last
shard with repeats) counts once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_score_matrix
from vlbias.metrics.functional.retrieval import (
    DEFAULT_KS,
    NO_GROUND_TRUTH,
    _check_index,
    _check_ks,
    _image_ranks,
    _recall_compute,
    _text_ranks,
)

_DIRECTIONS = ("text", "image")


def _first_per_query(ids: Tensor, ranks: Tensor) -> Tensor:
    """The ranks of distinct query ids, in id order (a repeated query's copies have equal ranks)."""
    unique, inverse = torch.unique(ids, return_inverse=True)
    out = torch.empty(unique.numel(), dtype=ranks.dtype, device=ranks.device)
    return out.scatter_(0, inverse, ranks)


class RetrievalRecall(TypedListStates, Metric):
    r"""Text retrieval (image → its captions) and image retrieval (caption → its image) R@K, pessimistic
    on ties; see :func:`~vlbias.metrics.functional.retrieval.retrieval_recall`.

    As input to ``update``:

    - ``scores`` (:class:`~torch.Tensor`): ``(b, gallery)`` score rows of ``b`` queries: for
      ``direction="text"`` rows of images over all captions, for ``"image"`` rows of captions over all images
    - ``query_ids`` (:class:`~torch.Tensor`): ``(b,)`` the image (``"text"``) or caption (``"image"``)
      index of each row
    - ``caption_to_image`` (:class:`~torch.Tensor`): ``(n_captions,)`` the image of every caption
    - ``direction`` (str): ``"text"`` or ``"image"``

    As output of ``compute``: the dict of :func:`~vlbias.metrics.functional.retrieval.retrieval_recall`
    (``txt_r{K}``, ``txt_r_mean``, ``img_r{K}``, ``img_r_mean``, ``r_mean``, ``txt_missing``).

    Args:
        ks: the cut-offs K; each must fit in the galleries of ``update``.
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> scores = torch.tensor([[0.9, 0.2, 0.8], [0.1, 0.8, 0.8], [0.3, 0.1, 0.0]])
        >>> caption_to_image = torch.tensor([0, 1, 1])
        >>> metric = RetrievalRecall(ks=(1, 2))
        >>> metric.update(scores[:2], torch.tensor([0, 1]), caption_to_image, direction="text")
        >>> metric.update(scores[2:], torch.tensor([2]), caption_to_image, direction="text")
        >>> metric.update(scores.T, torch.arange(3), caption_to_image, direction="image")
        >>> out = metric.compute()
        >>> round(out["img_r1"].item(), 3), int(out["txt_missing"])
        (0.667, 1)
    """

    is_differentiable: bool = False
    higher_is_better: bool = True
    full_state_update: bool = False
    list_state_specs = tuple((f"{d}_{what}", torch.int64, ()) for d in _DIRECTIONS for what in ("ids", "ranks"))

    text_ids: list[Tensor]
    text_ranks: list[Tensor]
    image_ids: list[Tensor]
    image_ranks: list[Tensor]

    def __init__(self, ks: Sequence[int] = DEFAULT_KS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ks = _check_ks(ks)
        for name, _, _ in self.list_state_specs:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(
        self, scores: Tensor, query_ids: Tensor, caption_to_image: Tensor, direction: Literal["text", "image"]
    ) -> None:
        """Add the ranks of the ``b`` queries whose score rows are ``scores``."""
        if direction not in _DIRECTIONS:
            raise InputError(f"Expected argument `direction` to be one of {_DIRECTIONS} but got {direction!r}")
        scores = check_score_matrix("scores", scores)
        if direction == "text":  # the number of images is not known here: any non-negative image index
            caption_to_image = _check_index("caption_to_image", caption_to_image, scores.shape[1], None)
            query_ids = _check_index("query_ids", query_ids, scores.shape[0], None)
            _check_ks(self.ks, scores.shape[1], "text retrieval")
            ranks = _text_ranks(scores, query_ids, caption_to_image)
        else:
            n_captions = caption_to_image.numel() if isinstance(caption_to_image, Tensor) else 0
            caption_to_image = _check_index("caption_to_image", caption_to_image, n_captions, scores.shape[1])
            query_ids = _check_index("query_ids", query_ids, scores.shape[0], n_captions)
            _check_ks(self.ks, scores.shape[1], "image retrieval")
            ranks = _image_ranks(scores, query_ids, caption_to_image)
        getattr(self, f"{direction}_ids").append(query_ids)
        getattr(self, f"{direction}_ranks").append(ranks)

    def compute(self) -> dict[str, Tensor]:
        """R@K of every distinct query seen since the last ``reset``."""
        text = _first_per_query(self.list_state("text_ids"), self.list_state("text_ranks"))
        image = _first_per_query(self.list_state("image_ids"), self.list_state("image_ranks"))
        out = _recall_compute(text, image, self.ks)
        out["txt_missing"] = (text == NO_GROUND_TRUTH).sum()
        return out

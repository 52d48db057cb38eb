r"""Recall@K of image-text retrieval from a similarity matrix, as ALBEF/BLIP/CLIP report it.

Text retrieval (TR) asks, for every image, for its captions; image retrieval (IR) asks, for every
caption, for its image. With scores :math:`S \in \mathbb{R}^{n_\text{images} \times n_\text{captions}}`
and ``caption_to_image`` :math:`g` (caption :math:`c` describes image :math:`g(c)`; an image may have
several captions), the rank of a query is that of its best-scored ground truth, counted pessimistically:

.. math::
    r_\text{TR}(i) = 1 + \#\{c : g(c) \ne i,\ S_{ic} \ge \max_{c' : g(c') = i} S_{ic'}\}, \qquad
    r_\text{IR}(c) = 1 + \#\{i \ne g(c) : S_{ic} \ge S_{g(c)c}\}

    \mathrm{R@}K = \frac{1}{|Q|} \sum_{q \in Q} [\, r(q) \le K \,]

A wrong item scoring *equal* to the best ground truth is counted as ranked above it (a tie is a hit only
if there is room for every tied wrong item in the top K), so constant or ``-inf`` scores (the candidates
that top-k re-ranking left out) never count as hits. Other ground-truth captions of the same image never
push a caption down. This is the "any ground truth in the top K" recall of ALBEF's ``itm_eval``
(``ALBEF/Retrieval.py``), which breaks ties by sort order instead.

An image without any caption has no TR ground truth: it is excluded from the TR recall and counted
(``txt_missing``). Scores must not be NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_score_matrix, shape_or_type

DEFAULT_KS = (1, 5, 10)
NO_GROUND_TRUTH = 0  # the rank of a query without a ground truth


def _check_index(name: str, index: Tensor, size: int, bound: int | None) -> Tensor:
    """``index`` as int64 ``(size,)`` with values in ``[0, bound)`` (``bound=None``: any non-negative value)."""
    if not isinstance(index, Tensor) or index.ndim != 1 or index.is_floating_point() or index.numel() != size:
        raise InputError(
            f"Expected argument `{name}` to be an integer tensor of shape ({size},) but got {shape_or_type(index)}"
        )
    if size and (int(index.min()) < 0 or (bound is not None and int(index.max()) >= bound)):
        raise InputError(
            f"Expected argument `{name}` to hold indices in [0, {bound or 'inf'}) but got "
            f"[{int(index.min())}, {int(index.max())}]"
        )
    return index.long()


def _check_ks(ks: Sequence[int], gallery: int | None = None, direction: str = "") -> tuple[int, ...]:
    """``ks`` as a tuple of positive integers, each at most ``gallery`` when it is given."""
    ks = tuple(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ConfigError(f"Expected argument `ks` to be a non-empty sequence of positive integers but got {ks!r}")
    if gallery is not None and max(ks) > gallery:
        raise ConfigError(
            f"Expected argument `ks` to be at most the {direction} gallery size {gallery} but got {max(ks)}"
        )
    return ks


def _text_ranks(rows: Tensor, image_ids: Tensor, caption_to_image: Tensor) -> Tensor:
    """Pessimistic TR ranks ``(b,)`` of images ``image_ids`` from their rows ``(b, n_captions)``;
    :data:`NO_GROUND_TRUTH` for an image without captions."""
    truth = caption_to_image[None, :] == image_ids[:, None]  # (b, n_captions)
    best = rows.masked_fill(~truth, float("-inf")).amax(dim=1, keepdim=True)  # (b, 1)
    ranks = 1 + ((rows >= best) & ~truth).sum(dim=1)
    return torch.where(truth.any(dim=1), ranks, NO_GROUND_TRUTH)


def _image_ranks(rows: Tensor, caption_ids: Tensor, caption_to_image: Tensor) -> Tensor:
    """Pessimistic IR ranks ``(b,)`` of captions ``caption_ids`` from their rows ``(b, n_images)``."""
    truth_image = caption_to_image[caption_ids]  # (b,)
    best = rows.gather(1, truth_image[:, None])  # (b, 1)
    return (rows >= best).sum(dim=1)  # the ground truth itself makes the 1


def _recall_compute(text_ranks: Tensor, image_ranks: Tensor, ks: Sequence[int]) -> dict[str, Tensor]:
    """R@K of ranks (TR ranks :data:`NO_GROUND_TRUTH` excluded and counted) and the means of ALBEF's table."""
    text_ranks = text_ranks[text_ranks != NO_GROUND_TRUTH]
    out: dict[str, Tensor] = {}
    for prefix, ranks in (("txt", text_ranks), ("img", image_ranks)):
        if ranks.numel() == 0:
            raise InputError(f"Expected at least one {prefix} retrieval query with a ground truth but got none")
        recalls = [(ranks <= k).double().mean() for k in ks]
        out.update({f"{prefix}_r{k}": recall for k, recall in zip(ks, recalls, strict=True)})
        out[f"{prefix}_r_mean"] = torch.stack(recalls).mean()
    out["r_mean"] = (out["txt_r_mean"] + out["img_r_mean"]) / 2
    return out


def retrieval_ranks(scores: Tensor, caption_to_image: Tensor) -> tuple[Tensor, Tensor]:
    """Pessimistic ranks of every TR query ``(n_images,)`` and IR query ``(n_captions,)`` (see the module
    docstring); an image without captions has TR rank :data:`NO_GROUND_TRUTH` (0).

    Example:
        >>> scores = torch.tensor([[0.9, 0.2, 0.8], [0.1, 0.8, 0.8]])
        >>> retrieval_ranks(scores, torch.tensor([0, 1, 1]))
        (tensor([1, 1]), tensor([1, 1, 2]))
    """
    scores = check_score_matrix("scores", scores)
    n_images, n_captions = scores.shape
    caption_to_image = _check_index("caption_to_image", caption_to_image, n_captions, n_images)
    text = _text_ranks(scores, torch.arange(n_images, device=scores.device), caption_to_image)
    image = _image_ranks(scores.T, torch.arange(n_captions, device=scores.device), caption_to_image)
    return text, image


def retrieval_recall(
    scores: Tensor,
    caption_to_image: Tensor,
    ks: Sequence[int] = DEFAULT_KS,
    image_scores: Tensor | None = None,
) -> dict[str, Tensor]:
    r"""Text and image retrieval R@K and their means (ALBEF's ``itm_eval`` table), pessimistic on ties.

    Args:
        scores: ``(n_images, n_captions)`` image-caption scores; the TR rows (and, without ``image_scores``,
            the IR columns).
        caption_to_image: ``(n_captions,)`` the image of each caption.
        ks: the cut-offs K; each must fit in both galleries.
        image_scores: ``(n_images, n_captions)`` other scores for IR (e.g. top-k re-ranking re-scores the
            candidates of each caption separately from those of each image).

    Returns:
        float64 scalars ``txt_r{K}``, ``txt_r_mean``, ``img_r{K}``, ``img_r_mean``, ``r_mean`` (fractions),
        and int64 ``txt_missing``: images without captions, left out of TR.

    Example:
        >>> scores = torch.tensor([[0.9, 0.2, 0.8], [0.1, 0.8, 0.8], [0.3, 0.1, 0.0]])
        >>> out = retrieval_recall(scores, torch.tensor([0, 1, 1]), ks=(1, 2))
        >>> [round(out[key].item(), 3) for key in ("txt_r1", "img_r1", "img_r2", "r_mean")]
        [1.0, 0.667, 1.0, 0.917]
        >>> int(out["txt_missing"])  # image 2 has no caption
        1
    """
    scores = check_score_matrix("scores", scores)
    image_scores = scores if image_scores is None else check_score_matrix("image_scores", image_scores)
    if image_scores.shape != scores.shape:
        raise InputError(
            f"Expected argument `image_scores` to have the shape of `scores` {tuple(scores.shape)} but got "
            f"{tuple(image_scores.shape)}"
        )
    n_images, n_captions = scores.shape
    ks = _check_ks(ks, n_captions, "text retrieval")
    _check_ks(ks, n_images, "image retrieval")
    caption_to_image = _check_index("caption_to_image", caption_to_image, n_captions, n_images)
    text = _text_ranks(scores, torch.arange(n_images, device=scores.device), caption_to_image)
    image = _image_ranks(image_scores.T, torch.arange(n_captions, device=scores.device), caption_to_image)
    out = _recall_compute(text, image, ks)
    out["txt_missing"] = (text == NO_GROUND_TRUTH).sum()
    return out

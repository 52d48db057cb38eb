r"""Top-k ITM re-ranking of a retrieval similarity matrix (ALBEF's and BLIP's ``evaluation`` in
``Retrieval.py`` / ``train_retrieval.py``).

Given ITC similarities :math:`S` ``(n_images, n_captions)``, every image query keeps its ``k_test``
most similar captions and every caption query its ``k_test`` most similar images (:func:`candidates`);
each candidate pair is re-scored by the adapter's MATCH head (the log-odds of "match"), and

.. math::
    S^\text{TR}_{ic} = \begin{cases} m(i, c) [+ S_{ic}] & c \in \text{top}_k(S_{i\cdot}) \\ -\infty & \text{otherwise}
    \end{cases}, \qquad
    S^\text{IR}_{ic} = \begin{cases} m(i, c) [+ S_{ic}] & i \in \text{top}_k(S_{\cdot c}) \\ -\infty & \text{otherwise}
    \end{cases}

(ALBEF and BLIP add the similarity, ``add_similarity=True``). :math:`S^\text{TR}` gives text retrieval
(its rows), :math:`S^\text{IR}` image retrieval (its columns): pass them to
:func:`~vlbias.metrics.functional.retrieval.retrieval_recall` as ``scores`` and ``image_scores``.

:func:`rerank` scores every distinct candidate pair once (a pair may be a candidate of its image and of
its caption), in batches of ``batch_size`` pairs, through the adapter's
:meth:`~vlbias.models.base.ModelAdapter.paired_match_logits` (ALBEF encodes each image and caption once).
:func:`rerank_per_query` is the reference: one query at a time, ``k_test`` pairs per call of
``adapter.run_capability(Capability.MATCH, ...)``. Both give the same matrices up to float rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ModelAdapter, require_capability


def candidates(similarity: Tensor, k_test: int) -> Tensor:
    """Column indices ``(rows, k_test)`` of each row's ``k_test`` largest similarities, the larger first
    and ties to the lower index (the first ``k_test`` of a stable descending sort, so a row alone gives the
    same candidates). Computed from ``topk``'s ``k_test + 1`` largest values, without sorting whole rows: the
    columns at or above the ``k_test``-th value, in rows where the ``k_test + 1``-th ties with it only the
    lowest-index tied columns that fit, then a stable sort of those ``k_test``. ``similarity`` must hold no
    NaN (:func:`rerank` checks).

    Example:
        >>> candidates(torch.tensor([[0.1, 0.7, 0.7, 0.2]]), k_test=2)
        tensor([[1, 2]])
    """
    similarity = similarity.contiguous()
    top = similarity.topk(min(k_test + 1, similarity.shape[1]), dim=1).values  # (rows, k + 1), the larger first
    kth = top[:, k_test - 1 : k_test]  # (rows, 1)
    chosen = similarity >= kth
    if top.shape[1] > k_test:
        crowded = (top[:, k_test] == kth[:, 0]).nonzero().flatten()  # rows with more ties than places
        if crowded.numel():
            values = similarity[crowded]
            room = k_test - (top[crowded, :k_test] > kth[crowded]).sum(dim=1, keepdim=True)
            tied = values == kth[crowded]
            chosen[crowded] = (values > kth[crowded]) | (tied & (tied.cumsum(dim=1) <= room))
    columns = chosen.nonzero()[:, 1].view(-1, k_test)  # each row's chosen columns, in column order
    order = torch.sort(similarity.gather(1, columns), dim=1, descending=True, stable=True).indices
    return columns.gather(1, order)


def _check(adapter: ModelAdapter, similarity: Tensor, pixel_values: Tensor, tokens: dict[str, Tensor], k_test: int):
    require_capability(adapter, Capability.MATCH, "retrieval re-ranking", hint="Use the ITC similarities alone.")
    if not isinstance(similarity, Tensor) or similarity.ndim != 2 or not similarity.is_floating_point():
        shape = tuple(similarity.shape) if isinstance(similarity, Tensor) else type(similarity).__name__
        raise InputError(f"Expected argument `similarity` to be a 2-D floating-point tensor but got {shape}")
    if similarity.isnan().any():
        row, column = similarity.isnan().nonzero()[0].tolist()
        raise InputError(
            f"Expected argument `similarity` to hold no NaN but got NaN at (image {row}, caption {column}); "
            f"check the embeddings it was computed from"
        )
    n_images, n_captions = similarity.shape
    if pixel_values.shape[0] != n_images or tokens["input_ids"].shape[0] != n_captions:
        raise InputError(
            f"Expected argument `similarity` to be (images, captions) = ({pixel_values.shape[0]}, "
            f"{tokens['input_ids'].shape[0]}) but got {tuple(similarity.shape)}"
        )
    if isinstance(k_test, bool) or not isinstance(k_test, int) or not 1 <= k_test <= min(n_images, n_captions):
        raise ConfigError(
            f"Expected argument `k_test` to be an integer in [1, {min(n_images, n_captions)}] (the smaller "
            f"gallery: {n_images} images, {n_captions} captions) but got {k_test!r}"
        )


def rerank(
    adapter: ModelAdapter,
    similarity: Tensor,
    pixel_values: Tensor,
    tokens: dict[str, Tensor],
    k_test: int,
    add_similarity: bool = False,
    batch_size: int = 1024,
) -> tuple[Tensor, Tensor]:
    """Re-rank the top ``k_test`` candidates of every image and caption query by ITM, batched.

    Args:
        adapter: a model with the MATCH capability (ALBEF, BLIP, ...).
        similarity: ``(n_images, n_captions)`` ITC similarities.
        pixel_values: ``(n_images, 3, H, W)`` prepared images (``adapter.prepare_images``).
        tokens: ``(n_captions, T)`` tensors of the prepared captions (``adapter.prepare_texts``).
        k_test: candidates per query, at most the smaller gallery.
        add_similarity: add the similarity to the match logit, as ALBEF and BLIP do.
        batch_size: pairs per forward pass.

    Returns:
        ``(text_scores, image_scores)``, both ``(n_images, n_captions)``: the re-ranked candidates of each
        image's row and of each caption's column, ``-inf`` elsewhere.
    """
    _check(adapter, similarity, pixel_values, tokens, k_test)
    n_images, n_captions = similarity.shape
    text_top = candidates(similarity, k_test)  # (n_images, k) captions of each image
    image_top = candidates(similarity.T, k_test)  # (n_captions, k) images of each caption
    text_pairs = torch.arange(n_images, device=similarity.device)[:, None] * n_captions + text_top
    image_pairs = image_top * n_captions + torch.arange(n_captions, device=similarity.device)[:, None]
    pairs, inverse = torch.unique(torch.cat([text_pairs.flatten(), image_pairs.flatten()]), return_inverse=True)
    with torch.no_grad():
        scores = adapter.paired_match_logits(pixel_values, tokens, pairs // n_captions, pairs % n_captions, batch_size)
    scores = scores.to(similarity.dtype)
    if add_similarity:
        scores = scores + similarity.flatten()[pairs]
    text_scores = torch.full_like(similarity, float("-inf"))
    image_scores = torch.full_like(similarity, float("-inf"))
    n_text = text_pairs.numel()
    text_scores.view(-1)[text_pairs.flatten()] = scores[inverse[:n_text]]
    image_scores.view(-1)[image_pairs.flatten()] = scores[inverse[n_text:]]
    return text_scores, image_scores


def rerank_per_query(
    adapter: ModelAdapter,
    similarity: Tensor,
    pixel_values: Tensor,
    tokens: dict[str, Tensor],
    k_test: int,
    add_similarity: bool = False,
    images: range | None = None,
    captions: range | None = None,
) -> tuple[Tensor, Tensor]:
    """:func:`rerank`'s result computed one query at a time: for each image its ``k_test`` candidate
    captions, then for each caption its ``k_test`` candidate images, each query's pairs in one
    ``run_capability(Capability.MATCH, ...)`` call. The reference of the tests and of
    ``scripts/bench_retrieval.py``, which times it on a subset of the queries (``images``, ``captions``:
    the image and caption queries to re-rank, default all; the others' rows and columns stay ``-inf``)."""
    _check(adapter, similarity, pixel_values, tokens, k_test)
    images = range(similarity.shape[0]) if images is None else images
    captions = range(similarity.shape[1]) if captions is None else captions
    text_scores = torch.full_like(similarity, float("-inf"))
    image_scores = torch.full_like(similarity, float("-inf"))
    with torch.no_grad():
        for image in images:
            top = candidates(similarity[image][None], k_test)[0]  # (k,)
            rows = {key: value[top] for key, value in tokens.items()}
            logits = adapter.run_capability(Capability.MATCH, pixel_values[image].expand(k_test, -1, -1, -1), rows)
            text_scores[image, top] = logits.to(similarity.dtype) + (similarity[image, top] if add_similarity else 0)
        for caption in captions:
            top = candidates(similarity[:, caption][None], k_test)[0]
            rows = {key: value[caption].expand(k_test, -1) for key, value in tokens.items()}
            logits = adapter.run_capability(Capability.MATCH, pixel_values[top], rows)
            image_scores[top, caption] = logits.to(similarity.dtype) + (
                similarity[top, caption] if add_similarity else 0
            )
    return text_scores, image_scores

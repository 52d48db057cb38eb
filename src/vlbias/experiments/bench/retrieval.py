"""Top-k ITM re-ranking for retrieval: vlbias's batched re-ranking against the per-query loop
(``scripts/bench_retrieval.py``).

A tiny random ALBEF (``load("albef", tiny=True)``) on CPU, random images and captions of 4-14 words from
its vocabulary, caption c describing image c mod images. Both sides start from the same ITC similarity
matrix. The loop (:func:`vlbias.retrieval.rerank_per_query`) re-scores one query at a time, ``k_test``
pairs per ``run_capability(Capability.MATCH, ...)`` call; the batched side
(:func:`vlbias.retrieval.rerank`) encodes each image and caption once and runs the fusion layers and ITM
head on every distinct candidate pair, ``batch_size`` pairs at a time. Prints the CPU, the median
seconds of ``repeats`` runs after one warm-up run each, the ratio, the largest score difference and
both sides' R@1/5/10. With ``loop_queries`` N the loop re-ranks only the first N image and the first
5N caption queries, and its time is EXTRAPOLATED linearly to all queries (marked as such in the table).

A third row times the algorithm of ALBEF's own evaluation (``Retrieval.py``'s ``evaluation``), which does
less than the per-query loop: every image and caption encoded once, then per query the fusion layers and the
ITM head on its ``k_test`` pairs in full (no shared keys and values, every position of the last layer). It
is the baseline the official code sets, written here with vlbias's ALBEF modules, on the same queries.
"""

from __future__ import annotations

import torch
from jsonargparse.typing import PositiveInt

from vlbias.experiments.bench.timing import machine, median_seconds
from vlbias.metrics.functional import retrieval_recall
from vlbias.models.registry import load
from vlbias.models.vocab import tiny_vocabulary
from vlbias.retrieval import candidates, rerank, rerank_per_query
from vlbias.runtime.threads import torch_threads


def official_evaluation_loop(
    adapter,
    similarity: torch.Tensor,
    pixel_values: torch.Tensor,
    tokens: dict,
    k_test: int,
    n_images: int,
    n_captions: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ALBEF's ``evaluation`` (``Retrieval.py``): images and captions encoded once, then per query its
    ``k_test`` candidates (:func:`candidates`, as the other two sides) through the fusion layers and ITM head."""
    model, mask = adapter.model, tokens["attention_mask"]
    text_scores = torch.full_like(similarity, float("-inf"))
    image_scores = torch.full_like(similarity, float("-inf"))
    with torch.no_grad():
        images = model.image_embeds(pixel_values)  # (N_i, 1 + P, H)
        texts = model.text_embeds(tokens["input_ids"], mask)  # (N_c, T, H)
        for image in range(n_images):
            top = candidates(similarity[image][None], k_test)[0]
            logits = model.itm_logits(model.fuse(texts[top], images[image].expand(k_test, -1, -1), mask[top]))
            text_scores[image, top] = logits[:, 1] - logits[:, 0]
        for caption in range(n_captions):
            top = candidates(similarity[:, caption][None], k_test)[0]
            text, text_mask = texts[caption].expand(k_test, -1, -1), mask[caption].expand(k_test, -1)
            logits = model.itm_logits(model.fuse(text, images[top], text_mask))
            image_scores[top, caption] = logits[:, 1] - logits[:, 0]
    return text_scores, image_scores


def _largest_difference(text: tuple, image: tuple, n_images: int, n_captions: int) -> float:
    """The largest |difference| of two sides' scores over the loop's queries (the -inf of non-candidates as 0)."""
    return max(
        (text[0][:n_images] - text[1][:n_images]).nan_to_num(0.0).abs().max().item(),
        (image[0][:, :n_captions] - image[1][:, :n_captions]).nan_to_num(0.0).abs().max().item(),
    )


def _random_gallery(adapter, images: int, captions: int) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """Random images and captions (drawn from seed 0) prepared for ``adapter``, and their similarity matrix
    ``(images, captions)``."""
    g = torch.Generator().manual_seed(0)
    vocabulary = [w for w in tiny_vocabulary() if w.isalpha()]
    texts = [
        " ".join(vocabulary[i] for i in torch.randint(len(vocabulary), (int(n),), generator=g))
        for n in torch.randint(4, 15, (captions,), generator=g)
    ]
    with torch.no_grad():
        pixel_values = adapter.prepare_images(torch.rand(images, 3, 32, 32, generator=g))
        tokens = adapter.prepare_texts(texts)
        similarity = adapter.embed_images(pixel_values) @ adapter.embed_texts(tokens).T  # (images, captions)
    return pixel_values, tokens, similarity


def bench_retrieval(
    images: PositiveInt = 1000,
    captions: PositiveInt = 5000,
    k_test: int = 128,
    batch_size: PositiveInt = 1024,
    threads: int = 1,
    repeats: PositiveInt = 3,
    loop_queries: PositiveInt | None = None,
) -> None:
    """Time re-ranking three ways and print the table, the scores' agreement and (every query) the recalls.

    Args:
        images: Random images in the gallery.
        captions: Random captions in the gallery.
        k_test: Candidates per query (ALBEF/BLIP Flickr30K: 128).
        batch_size: Pairs per forward pass of the batched side.
        threads: Torch threads.
        repeats: Timed runs of each side after a warm-up; median.
        loop_queries: Time the loop on N image and 5N caption queries; extrapolate.
    """
    with torch_threads(threads):
        adapter = load("albef", tiny=True, device="cpu").eval()
        pixel_values, tokens, similarity = _random_gallery(adapter, images, captions)
        caption_to_image = torch.arange(captions) % images
        n_images = images if loop_queries is None else min(loop_queries, images)
        n_captions = captions if loop_queries is None else min(5 * loop_queries, captions)
        scale = (images + captions) / (n_images + n_captions)
        queries = {"images": range(n_images), "captions": range(n_captions)}
        fast, (fast_text, fast_image) = median_seconds(
            lambda: rerank(adapter, similarity, pixel_values, tokens, k_test, batch_size=batch_size), repeats
        )
        slow, (slow_text, slow_image) = median_seconds(
            lambda: rerank_per_query(adapter, similarity, pixel_values, tokens, k_test, **queries), repeats
        )
        reference, (reference_text, reference_image) = median_seconds(
            lambda: official_evaluation_loop(adapter, similarity, pixel_values, tokens, k_test, n_images, n_captions),
            repeats,
        )
    slow_all = slow * scale
    diff = _largest_difference((fast_text, slow_text), (fast_image, slow_image), n_images, n_captions)
    same_inf = bool(
        torch.equal(fast_text[:n_images].isinf(), slow_text[:n_images].isinf())
        and torch.equal(fast_image[:, :n_captions].isinf(), slow_image[:, :n_captions].isinf())
    )
    print(
        f"{machine(threads)}; tiny ALBEF, {images} images x {captions} captions, "
        f"k_test = {k_test}, batch {batch_size} pairs, median of {repeats}"
    )
    loop_label = "per-query loop" if scale == 1 else f"per-query loop, EXTRAPOLATED x{scale:.2f}"
    print(f"{'method':<44}{'seconds':>10}{'ratio':>8}")
    print(f"{'vlbias batched':<44}{fast:>10.2f}{1.0:>8.1f}")
    if scale != 1:
        print(f"{f'per-query loop ({n_images} + {n_captions} queries)':<44}{slow:>10.2f}{'':>8}")
    print(f"{loop_label:<44}{slow_all:>10.2f}{slow_all / fast:>8.1f}")
    reference_all = reference * scale
    reference_label = "ALBEF's evaluation loop" + ("" if scale == 1 else f", EXTRAPOLATED x{scale:.2f}")
    print(f"{reference_label:<44}{reference_all:>10.2f}{reference_all / fast:>8.1f}")
    reference_diff = _largest_difference(
        (reference_text, slow_text), (reference_image, slow_image), n_images, n_captions
    )
    print(f"max |ALBEF's evaluation loop - per-query loop| = {reference_diff:.2e}")
    print(
        f"max |batched - loop| = {diff:.2e} over the loop's {n_images} + {n_captions} queries; "
        f"same candidates: {same_inf}"
    )
    if scale == 1:
        fast_recall = retrieval_recall(fast_text, caption_to_image, image_scores=fast_image)
        slow_recall = retrieval_recall(slow_text, caption_to_image, image_scores=slow_image)
        keys = [f"{p}_r{k}" for p in ("txt", "img") for k in (1, 5, 10)]
        print("recall batched: " + ", ".join(f"{key} {fast_recall[key].item():.4f}" for key in keys))
        print("recall loop:    " + ", ".join(f"{key} {slow_recall[key].item():.4f}" for key in keys))
        print(f"same recalls: {all(torch.equal(fast_recall[key], slow_recall[key]) for key in keys)}")

"""Fitting every registered debiaser on cached embeddings: seconds per method against a matrix multiply of the same
size, timed in the same run (``scripts/bench_debias.py``).

The embeddings are drawn once, before any timing (the "cache": a model's embeddings of a data set, computed once),
as unit float32 rows of dimension ``dims``: ``n`` reference images in two groups whose means differ along one
direction (a planted attribute), 2 x 16 attribute prompts (2 x D/4 when D < 64) leaning the same way, 64 prompt pairs, 256 concept
prompts and 16 helpful pairs, the images' classes cycling through 6; the text encoder that methods building their own texts call (BendVLM) returns a
fixed random unit row per text, drawn once per text and kept. Each method gets what it ``NEEDS`` from that one
:class:`~vlbias.mitigation.debiaser.FitData`.

Per method: the median wall seconds of a fit (a new debiaser each time) and of transforming the ``n`` image and
``n`` text embeddings, after one warm-up; the rounds alternate their order (:func:`~vlbias.experiments.bench.timing.interleaved`).
The baseline is ``(n, D) @ (D, D)``, one linear map of every reference embedding: a ratio of 10 means the fit costs
ten such products. Prints the CPU and thread count, then one row per method.
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from jsonargparse.typing import PositiveInt
from torch import Tensor

from vlbias.experiments.bench.timing import elapsed, interleaved, machine
from vlbias.mitigation.debiaser import FitData
from vlbias.mitigation.registry import debiaser_class, list_debiasers
from vlbias.runtime.threads import torch_threads

N_ATTRIBUTE_PROMPTS, N_PAIRS, N_CONCEPTS, N_HELPFUL, N_CLASSES = 16, 64, 256, 16, 6
BASELINE = "matmul (n, D) @ (D, D)"


def cached_encoder(dims: int) -> Callable[[Sequence[str]], Tensor]:
    """A text encoder returning, for each text, a unit row drawn once from a generator seeded by the text."""
    cache: dict[str, Tensor] = {}

    def encode(texts: Sequence[str]) -> Tensor:
        for text in texts:
            if text not in cache:
                generator = torch.Generator().manual_seed(zlib.crc32(text.encode()))
                cache[text] = F.normalize(torch.randn(dims, generator=generator), dim=0)
        return torch.stack([cache[text] for text in texts])

    return encode


def random_fit_data(n: int, dims: int, seed: int = 0) -> FitData:
    """Every :class:`FitData` field, drawn from ``seed`` as the module docstring says."""
    g = torch.Generator().manual_seed(seed)

    def unit(*shape: int, shift: float = 0.0) -> Tensor:
        return F.normalize(torch.randn(*shape, dims, generator=g) + shift * direction, dim=-1)

    direction = F.normalize(torch.randn(dims, generator=g), dim=0)
    per_value = min(N_ATTRIBUTE_PROMPTS, dims // 4)  # fewer prompts than dimensions, as a projection needs
    labels = ["a" if k % 2 == 0 else "b" for k in range(n)]
    sign = torch.tensor([1.0 if label == "a" else -1.0 for label in labels])[:, None]
    images = F.normalize(torch.randn(n, dims, generator=g) + 0.5 * sign * direction, dim=-1)
    return FitData(
        reference_images=images,
        reference_labels=labels,
        reference_classes=[k % N_CLASSES for k in range(n)],
        attribute_prompts={"a": unit(per_value, shift=1.0), "b": unit(per_value, shift=-1.0)},
        prompt_pairs=unit(N_PAIRS, 2),
        concept_prompts=unit(N_CONCEPTS),
        helpful_pairs=unit(N_HELPFUL, 2),
        encode_text=cached_encoder(dims),
        attribute_words={"a": ["man"], "b": ["woman"]},
    )


def bench_debias(
    n: PositiveInt = 10_000,
    dims: PositiveInt = 512,
    threads: int = 1,
    repeats: PositiveInt = 3,
    methods: Sequence[str] | None = None,
) -> None:
    """Time each method's fit and transform against the baseline and print the table.

    Args:
        n: Cached reference image embeddings (and text embeddings transformed).
        dims: Embedding dimension D.
        threads: Torch threads.
        repeats: Timed rounds after a warm-up; medians reported.
        methods: Registered debiasers to time (default every one).
    """
    methods = list(methods or list_debiasers())
    data = random_fit_data(n, dims)
    texts = [f"a photo of thing {k}." for k in range(n)]
    text_embeddings = data.encode_text(texts)
    matrix = torch.randn(dims, dims, generator=torch.Generator().manual_seed(1))
    with torch_threads(threads):
        fitted = {method: debiaser_class(method)().fit(data) for method in methods}  # warm-up

        def fit(method: str) -> float:
            if method == BASELINE:
                return elapsed(lambda: data.reference_images @ matrix)
            return elapsed(lambda: debiaser_class(method)().fit(data))

        def transform(method: str) -> float:
            debiaser = fitted[method]
            return elapsed(
                lambda: (
                    debiaser.transform_images(data.reference_images),
                    debiaser.transform_texts(text_embeddings, texts),
                )
            )

        fits = interleaved([BASELINE, *methods], repeats, fit)
        transforms = interleaved(methods, repeats, transform)
    baseline = statistics.median(fits[BASELINE])
    print(f"{machine(threads)}; n = {n} cached embeddings, D = {dims}, median of {repeats}")
    print(f"{'method':<24}{'fit s':>10}{'ratio':>10}{'transform s':>14}{'ratio':>10}")
    print(f"{BASELINE:<24}{baseline:>10.3g}{1.0:>10.1f}")
    for method in methods:
        fit_s, transform_s = statistics.median(fits[method]), statistics.median(transforms[method])
        print(f"{method:<24}{fit_s:>10.3g}{fit_s / baseline:>10.3g}{transform_s:>14.3g}{transform_s / baseline:>10.3g}")

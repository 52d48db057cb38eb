"""ALBEF ITM scores of retrieval candidate pairs at base width: the fusion layers as ALBEF's own evaluation runs
them against vlbias' pair path, same pairs, same run (``scripts/bench_pair_fusion.py``).

Re-ranking scores every candidate (image, caption) pair with the fusion layers and the ITM head. Both sides
here start from the same encoder outputs (each image and caption encoded once, as ALBEF's ``evaluation`` in
``Retrieval.py`` does; not timed) and score the same pairs:

* ``ALBEF's evaluation``: per query, its ``k_test`` pairs through ``ALBEF.fuse`` with the image tokens
  repeated per pair (every fusion layer projects an image to cross-attention keys and values once per pair,
  and the last layer runs at every text position), then the ITM head;
* ``vlbias pair path``: what ``ALBEFAdapter.paired_match_logits`` runs, ``batch_size`` pairs at a time: the
  first fusion layer's self-attention and cross-attention queries once per caption (:meth:`ALBEF.fusion_start`,
  :meth:`ALBEF.fusion_queries`), the keys and values once per image (:meth:`ALBEF.fusion_keys_values`), and per
  pair the rest, the last layer at CLS alone (:meth:`ALBEF.fused_cls`, its self-attention's key and value
  projections folded into the CLS query), the queries of pairs that read the same image attending to it
  together.

Weights are random at ALBEF-base sizes (768 wide, 12 heads, 3072 FFN; 256 px images in 16 px patches: 257
image tokens, or ``image_size`` 384: 577, the retrieval checkpoints' resolution), with ``fusion_layers``
fusion layers (ALBEF has 6). Queries: every image with ``k_test`` random captions and every caption with
``k_test`` random images. Prints the median of ``repeats`` runs after a warm-up, the ratio and the largest
difference of the two sides' logits.
"""

from __future__ import annotations

import torch
from jsonargparse.typing import PositiveInt

from vlbias.errors import ConfigError
from vlbias.experiments.bench.timing import machine, median_seconds
from vlbias.models.families.albef_modeling import ALBEF, ALBEFConfig
from vlbias.runtime.threads import torch_threads


def bench_pair_fusion(
    images: PositiveInt = 8,
    captions: PositiveInt = 40,
    k_test: PositiveInt = 8,
    length: PositiveInt = 12,
    image_size: int = 256,
    fusion_layers: int = 6,
    batch_size: PositiveInt = 256,
    threads: int = 1,
    repeats: PositiveInt = 3,
) -> None:
    """Score the same candidate pairs both ways and print the table and the logits' largest difference.

    Args:
        images: Images (queries and candidates).
        captions: Captions (queries and candidates).
        k_test: Candidates per query.
        length: Tokens per caption.
        image_size: Image side in pixels (256; the retrieval checkpoints' 384).
        fusion_layers: Fusion layers to run (ALBEF has 6).
        batch_size: Pairs per pass of the vlbias side.
        threads: Torch threads.
        repeats: Timed runs of each side after a warm-up; median.
    """
    if fusion_layers < 1:
        raise ConfigError(
            f"--fusion_layers must be at least 1 (the fusion layers are what is timed), not {fusion_layers}"
        )
    with torch_threads(threads):
        torch.manual_seed(0)
        config = ALBEFConfig(image_size=image_size, vision_layers=1, num_layers=1 + fusion_layers, fusion_layer=1)
        model = ALBEF(config).eval()
        tokens = (config.image_size // config.patch_size) ** 2 + 1
        image_states = torch.randn(images, tokens, config.hidden_size)  # vision encoder outputs
        texts = torch.randn(captions, length, config.hidden_size)  # text-mode outputs
        mask = torch.ones(captions, length, dtype=torch.long)
        text_top = torch.rand(images, captions).argsort(dim=1)[:, :k_test]  # captions of each image
        image_top = torch.rand(captions, images).argsort(dim=1)[:, :k_test]  # images of each caption
        image_rows = torch.cat([torch.arange(images).repeat_interleave(k_test), image_top.flatten()])
        text_rows = torch.cat([text_top.flatten(), torch.arange(captions).repeat_interleave(k_test)])

        def official() -> torch.Tensor:
            logits = []
            for image in range(images):
                top = text_top[image]
                fused = model.fuse(texts[top], image_states[image].expand(k_test, -1, -1), mask[top])
                logits.append(model.itm_logits(fused))
            for caption in range(captions):
                repeated, repeated_mask = texts[caption].expand(k_test, -1, -1), mask[caption].expand(k_test, -1)
                logits.append(model.itm_logits(model.fuse(repeated, image_states[image_top[caption]], repeated_mask)))
            return torch.cat(logits)

        def pair_path() -> torch.Tensor:
            started = model.fusion_start(texts, mask)
            queries = model.fusion_queries(started)
            keys_values = model.fusion_keys_values(image_states)
            logits = []
            for batch in torch.arange(image_rows.numel()).split(batch_size):
                rows = text_rows[batch]
                pair_texts, pair_queries = started.index_select(0, rows), queries.index_select(0, rows)
                fused = model.fused_cls(
                    pair_texts, mask.index_select(0, rows), keys_values, image_rows[batch], pair_queries
                )
                logits.append(model.itm_logits(fused))
            return torch.cat(logits)

        results, seconds = {}, {}
        with torch.no_grad():
            for name, run in (("ALBEF's evaluation", official), ("vlbias pair path", pair_path)):
                seconds[name], results[name] = median_seconds(run, repeats)
    difference = (results["ALBEF's evaluation"] - results["vlbias pair path"]).abs().max().item()
    print(
        f"{machine(threads)}; ALBEF base width, {fusion_layers} fusion layers, "
        f"{tokens} image tokens, captions of {length} tokens; {images} images x {captions} captions, "
        f"k_test = {k_test}: {image_rows.numel()} pairs; median of {repeats}"
    )
    _print_table(seconds, image_rows.numel())
    print(f"max |ITM logits difference| = {difference:.2e}")


def _print_table(seconds: dict[str, float], pairs: int) -> None:
    """Each side's seconds, milliseconds per pair and ratio to the vlbias pair path."""
    print(f"{'method':<24}{'seconds':>10}{'ms / pair':>11}{'ratio':>8}")
    for name in seconds:
        ms = 1000 * seconds[name] / pairs
        print(f"{name:<24}{seconds[name]:>10.2f}{ms:>11.2f}{seconds[name] / seconds['vlbias pair path']:>8.1f}")

"""ALBEF masked-word scoring of rows that share images, at base width: what the fusion layers and
the MLM head cost per batch, four ways in the same run (``scripts/bench_shared_rows.py``).

A CounterBias batch of 32 items scores 512 (image, caption) rows that read 64 distinct images
(V_f, V_cf) and a few distinct captions; every suite that reads several captions per image has
the same layout. The vision encoder and the text layers below ``fusion_layer`` run once per
distinct image and text in all four variants (they are not timed); they differ in the fusion
layers and the head:

* ``per-row K/V, head everywhere``: each row gets its image's tokens gathered (``(R, 257, 768)``),
  so every fusion layer projects an image to cross-attention keys and values once per row that
  reads it, and the MLM head runs at all ``T`` text positions (``(R, T, 30522)`` logits) before
  the masks are picked. This is what vlbias did up to 3b1a692.
* ``per-row K/V, head at masks``: the head at the mask positions alone.
* ``shared K/V, head at masks``: ``ALBEF.fuse(..., image_rows)`` and the head at the masks
  (vlbias from 9b31a67).
* ``shared K/V, last layer at masks``: ``ALBEF.fuse(..., image_rows, positions)``, whose last fusion
  layer computes the masks' states alone, then the head there: what
  ``ALBEFAdapter.paired_fill_mask_logits`` now does.

Weights are random at ALBEF-base sizes (768 wide, 12 heads, 3072 FFN, 30522 words, 256 px images
in 16 px patches: 257 image tokens); ``fusion_layers`` sets how many fusion layers run (ALBEF
has 6; one keeps a CPU run short, and the per-layer saving of the shared keys and values is the
same, while the last layer's is one layer's whatever their number). All four variants'
log-probabilities at the masks are checked to agree. The variants run in interleaved rounds; the fastest run of
each is reported (the least disturbed).
"""

from __future__ import annotations

import time

import torch
from jsonargparse.typing import PositiveInt

from vlbias.experiments.bench.timing import interleaved
from vlbias.models.base import at_positions
from vlbias.models.families.albef_modeling import ALBEF, ALBEFConfig
from vlbias.runtime.threads import torch_threads


def bench_shared_rows(
    images: PositiveInt = 64,
    rows_per_image: PositiveInt = 8,
    texts: PositiveInt = 8,
    length: PositiveInt = 12,
    fusion_layers: int = 1,
    threads: int = 1,
    repeats: PositiveInt = 3,
) -> None:
    """Score one batch's rows four ways and print each variant's time and its largest difference from the first.

    Args:
        images: Distinct images in a batch.
        rows_per_image: Rows (captions scored) per image.
        texts: Distinct captions.
        length: Tokens per caption.
        fusion_layers: Fusion layers to run (ALBEF has 6).
        threads: Torch threads.
        repeats: Runs of each variant; the fastest is reported.
    """
    with torch_threads(threads):
        torch.manual_seed(0)
        config = ALBEFConfig(vision_layers=1, num_layers=1 + fusion_layers, fusion_layer=1)
        model = ALBEF(config).eval()
        rows = images * rows_per_image
        image_embeds = torch.randn(images, (config.image_size // config.patch_size) ** 2 + 1, config.hidden_size)
        text_embeds = torch.randn(texts, length, config.hidden_size)
        image_rows = torch.arange(images).repeat_interleave(rows_per_image)
        text_rows = torch.randint(texts, (rows,))
        positions = torch.randint(1, length - 1, (rows, 1))  # one mask per row
        row_texts = text_embeds.index_select(0, text_rows)

        def per_row_everywhere():
            fused = model.fuse(row_texts, image_embeds.index_select(0, image_rows))
            return at_positions(model.mlm_logits(fused), positions)

        def per_row_at_masks():
            fused = model.fuse(row_texts, image_embeds.index_select(0, image_rows))
            return model.mlm_logits(at_positions(fused, positions))

        def shared_at_masks():
            return model.mlm_logits(at_positions(model.fuse(row_texts, image_embeds, image_rows=image_rows), positions))

        def last_layer_at_masks():
            return model.mlm_logits(model.fuse(row_texts, image_embeds, image_rows=image_rows, positions=positions))

        variants = {
            "per-row K/V, head everywhere": per_row_everywhere,
            "per-row K/V, head at masks": per_row_at_masks,
            "shared K/V, head at masks": shared_at_masks,
            "shared K/V, last layer at masks": last_layer_at_masks,
        }
        outputs = {}

        def time_one(name: str) -> float:
            start = time.perf_counter()
            outputs[name] = variants[name]().log_softmax(dim=-1)
            return time.perf_counter() - start

        with torch.inference_mode():
            seconds = {name: min(times) for name, times in interleaved(variants, repeats, time_one).items()}

    reference = outputs["per-row K/V, head everywhere"]
    baseline = seconds["per-row K/V, head everywhere"]
    print(
        f"ALBEF base width, random weights, {fusion_layers} fusion layer(s), {rows} rows over {images} images "
        f"x {texts} captions of {length} tokens, CPU {threads} thread(s), fastest of {repeats}"
    )
    print(f"{'variant':<34}{'seconds':>10}{'rows/s':>10}{'speed-up':>10}{'max |diff|':>12}")
    for name in variants:
        diff = float((outputs[name] - reference).abs().max())
        print(
            f"{name:<34}{seconds[name]:>10.2f}{rows / seconds[name]:>10.0f}{baseline / seconds[name]:>9.2f}x{diff:>12.1e}"
        )
    print(f"largest |log-probability| of the first variant: {float(reference.abs().max()):.1f}")
    print(
        f"(R, T, V) logits the head no longer computes: {rows * length * config.vocab_size * 4 / 2**20:.0f} MiB in float32"
    )

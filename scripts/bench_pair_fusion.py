"""ALBEF ITM scores of retrieval candidate pairs at base width: the fusion layers as ALBEF's own evaluation runs
them against vlbias' pair path, same pairs, same run.

Re-ranking scores every candidate (image, caption) pair with the fusion layers and the ITM head. Both sides
here start from the same encoder outputs (each image and caption encoded once, as ALBEF's ``evaluation`` in
``Retrieval.py`` does; not timed) and score the same pairs:

* ``ALBEF's evaluation``: per query, its ``k_test`` pairs through ``ALBEF.fuse`` with the image tokens
  repeated per pair (every fusion layer projects an image to cross-attention keys and values once per pair,
  and the last layer runs at every text position), then the ITM head;
* ``vlbias pair path``: what ``ALBEFAdapter.paired_match_logits`` runs, ``--batch_size`` pairs at a time: the
  first fusion layer's self-attention and cross-attention queries once per caption (:meth:`ALBEF.fusion_start`,
  :meth:`ALBEF.fusion_queries`), the keys and values once per image (:meth:`ALBEF.fusion_keys_values`), and per
  pair the rest, the last layer at CLS alone (:meth:`ALBEF.fused_cls`, its self-attention's key and value
  projections folded into the CLS query), the queries of pairs that read the same image attending to it
  together.

Weights are random at ALBEF-base sizes (768 wide, 12 heads, 3072 FFN; 256 px images in 16 px patches: 257
image tokens, or ``--image_size 384``: 577, the retrieval checkpoints' resolution), with ``--fusion_layers``
fusion layers (ALBEF has 6). Queries: every image with ``k_test`` random captions and every caption with
``k_test`` random images. Prints the median of ``--repeats`` runs after a warm-up, the ratio and the largest
difference of the two sides' logits.

Run:
    python scripts/bench_pair_fusion.py --images 8 --captions 40 --k_test 8 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from vlbias.environment import cpu_name
from vlbias.models.albef_modeling import ALBEF, ALBEFConfig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--captions", type=int, default=40)
    parser.add_argument("--k_test", type=int, default=8)
    parser.add_argument("--length", type=int, default=12, help="tokens per caption")
    parser.add_argument("--image_size", type=int, default=256)
    parser.add_argument("--fusion_layers", type=int, default=6)
    parser.add_argument("--batch_size", type=int, default=256, help="pairs per pass of the vlbias side")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each side after a warm-up; median")
    args = parser.parse_args(argv)
    if args.fusion_layers < 1:
        parser.error(
            f"--fusion_layers must be at least 1 (the fusion layers are what is timed), not {args.fusion_layers}"
        )
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = ALBEFConfig(image_size=args.image_size, vision_layers=1, num_layers=1 + args.fusion_layers, fusion_layer=1)
    model = ALBEF(config).eval()
    tokens = (config.image_size // config.patch_size) ** 2 + 1
    images = torch.randn(args.images, tokens, config.hidden_size)  # vision encoder outputs
    texts = torch.randn(args.captions, args.length, config.hidden_size)  # text-mode outputs
    mask = torch.ones(args.captions, args.length, dtype=torch.long)
    text_top = torch.rand(args.images, args.captions).argsort(dim=1)[:, : args.k_test]  # captions of each image
    image_top = torch.rand(args.captions, args.images).argsort(dim=1)[:, : args.k_test]  # images of each caption
    image_rows = torch.cat([torch.arange(args.images).repeat_interleave(args.k_test), image_top.flatten()])
    text_rows = torch.cat([text_top.flatten(), torch.arange(args.captions).repeat_interleave(args.k_test)])

    def official() -> torch.Tensor:
        logits = []
        for image in range(args.images):
            top = text_top[image]
            fused = model.fuse(texts[top], images[image].expand(args.k_test, -1, -1), mask[top])
            logits.append(model.itm_logits(fused))
        for caption in range(args.captions):
            repeated, repeated_mask = texts[caption].expand(args.k_test, -1, -1), mask[caption].expand(args.k_test, -1)
            logits.append(model.itm_logits(model.fuse(repeated, images[image_top[caption]], repeated_mask)))
        return torch.cat(logits)

    def pair_path() -> torch.Tensor:
        started = model.fusion_start(texts, mask)
        queries = model.fusion_queries(started)
        keys_values = model.fusion_keys_values(images)
        logits = []
        for batch in torch.arange(image_rows.numel()).split(args.batch_size):
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
            results[name] = run()  # warm-up
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
            seconds[name] = statistics.median(times)
    difference = (results["ALBEF's evaluation"] - results["vlbias pair path"]).abs().max().item()
    print(
        f"CPU: {cpu_name()}, {args.threads} thread(s); ALBEF base width, {args.fusion_layers} fusion layers, "
        f"{tokens} image tokens, captions of {args.length} tokens; {args.images} images x {args.captions} captions, "
        f"k_test = {args.k_test}: {image_rows.numel()} pairs; median of {args.repeats}"
    )
    print(f"{'method':<24}{'seconds':>10}{'ms / pair':>11}{'ratio':>8}")
    for name in seconds:
        ms = 1000 * seconds[name] / image_rows.numel()
        print(f"{name:<24}{seconds[name]:>10.2f}{ms:>11.2f}{seconds[name] / seconds['vlbias pair path']:>8.1f}")
    print(f"max |ITM logits difference| = {difference:.2e}")


if __name__ == "__main__":
    main()

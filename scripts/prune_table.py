"""Effect of post-hoc debiasing on planted bias: train the quickstart tiny CLIP on BiasWorld (strength 0.9) for
several seeds, prune 10 % of its embedding dimensions with each strategy, and print a markdown table.

    python scripts/prune_table.py                          # seeds 0 1 2, ranked greedy clip_clip + projection
    python scripts/prune_table.py --seeds 0 --keep runs/prune_table
    python scripts/prune_table.py --embed_dim 512 --theta_quantile 1.0   # variants (defaults: 64, 0.9, 0.1)

Each seed: ``vlbias fit --config configs/experiment/quickstart.yaml`` with bias strength 0.9 and every seed set
(:func:`vlbias.sanity.fit_on_biasworld`; no logger, no callbacks), then ``vlbias prune`` (:func:`vlbias.prune.prune`)
of the exported model on BiasWorld's balanced *val* split (Θ = the MI's 0.9 quantile for ranked and greedy,
``--theta_quantile``; N = 10 % of D, ``--fraction``), so the dimensions are chosen on other images than those
they are judged on. ``--embed_dim`` trains the tiny CLIP with another projection size D (the paper's CLIP has
512; the quickstart's has 64). Judged on the balanced *test* split: the cross-modal effect size |d| of the
``mmbias`` suite's test (men vs women against the man- and woman-stereotyped activity phrases) and the
zero-shot activity accuracy, before and after removing the chosen dimensions. ``projection`` is the debias_vl baseline (Chuang et al., 2023): every text embedding
projected orthogonally to BiasWorld's group prompts ("a photo of a man.", ...), images unchanged.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from vlbias.data.biasworld import GROUPS, BiasWorld, group_phrases
from vlbias.mitigation import apply_projection, effect_size_without, orthogonal_projection
from vlbias.mitigation.zero_shot import zero_shot_accuracy
from vlbias.prune import biasworld_data, prune
from vlbias.sanity import fit_on_biasworld, mean_sd

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "quickstart.yaml"
STRENGTH, FRACTION, THETA_QUANTILE, EMBED_DIM = 0.9, 0.1, 0.9, 64
STRATEGIES = ("ranked", "greedy", "clip_clip")


def embed(adapter, world: BiasWorld, split: str) -> dict:
    """The test's sets, the images with their activity labels, the class prompts, all embedded (float64)."""
    data = biasworld_data(world, split)
    (spec,) = data.tests
    with torch.no_grad():
        images = torch.cat(
            [
                adapter.embed_images(adapter.prepare_images(world.images(split)[i : i + 128].float() / 255.0))
                for i in range(0, len(data.dataset), 128)
            ]
        ).double()
        texts = {key: adapter.embed_texts(adapter.prepare_texts(spec[key])).double() for key in ("a", "b")}
        prompts = [p for prompts in data.class_prompts for p in prompts]
        prompt_embeddings = adapter.embed_texts(adapter.prepare_texts(prompts)).double()
        bias = adapter.embed_texts(adapter.prepare_texts([p for g in GROUPS for p in group_phrases(g)])).double()
    items = world.items(split)
    groups = torch.tensor([GROUPS.index(item.group) for item in items])
    return {
        "name": spec["name"],
        "x": images[groups == 0],
        "y": images[groups == 1],
        "a": texts["a"],
        "b": texts["b"],
        "images": images,
        "labels": torch.tensor([data.dataset[i]["activity"] for i in range(len(items))]),
        "prompts": prompt_embeddings,
        "prompt_classes": torch.tensor([k for k, prompts in enumerate(data.class_prompts) for _ in prompts]),
        "bias": bias,
    }


def judged(e: dict, removed: list[int]) -> tuple[float, float]:
    """|d| and zero-shot accuracy on the embedded split with ``removed`` left out."""
    removed = torch.tensor(removed, dtype=torch.long)
    d = float(effect_size_without(e["x"], e["y"], e["a"], e["b"], removed))
    return abs(d), zero_shot_accuracy(e["images"], e["prompts"], e["prompt_classes"], e["labels"], removed)


def projected(e: dict) -> tuple[float, float]:
    """|d| and accuracy with the text embeddings projected off the group prompts' span."""
    p = orthogonal_projection(e["bias"])
    a, b, prompts = (apply_projection(e[key], p) for key in ("a", "b", "prompts"))
    d = float(effect_size_without(e["x"], e["y"], a, b, torch.arange(0)))
    return abs(d), zero_shot_accuracy(e["images"], prompts, e["prompt_classes"], e["labels"])


def run_seed(
    seed: int, work: Path, strategies: list[str], with_projection: bool, options: argparse.Namespace
) -> list[dict]:
    start = time.perf_counter()
    sizes = ["--model.init_args.tiny_sizes", f"{{projection_dim: {options.embed_dim}}}"]
    cli = fit_on_biasworld(
        QUICKSTART, STRENGTH, seed, work / f"fit{seed}", sizes if options.embed_dim != EMBED_DIM else []
    )
    world_options = {
        "bias_strength": STRENGTH,
        "seed": seed,
        **{
            k: v
            for k, v in cli.datamodule.world.config.items()
            if k in ("eval_per_combination", "image_size", "neutral_caption_rate", "hidden_object_rate")
        },
    }
    test = embed(cli.model.adapter, BiasWorld(**world_options), "test")
    d_before, accuracy_before = judged(test, [])
    rows = []
    for strategy in strategies:
        theta = {"theta_quantile": options.theta_quantile} if strategy != "clip_clip" else {}
        outcome = prune(
            "clip", "biasworld", work / f"prune{seed}_{strategy}", checkpoint=str(work / f"fit{seed}" / "model"),
            fraction=options.fraction, strategy=strategy, seed=seed, split="val", biasworld=world_options, **theta,
        )  # fmt: skip
        d_after, accuracy_after = judged(test, outcome["summary"]["removed"])
        rows.append({"seed": seed, "method": strategy, "n": outcome["summary"]["n_remove"], "d_before": d_before,
                     "d_after": d_after, "acc_before": accuracy_before, "acc_after": accuracy_after})  # fmt: skip
    if with_projection:
        d_after, accuracy_after = projected(test)
        rows.append({"seed": seed, "method": "projection", "n": 0, "d_before": d_before, "d_after": d_after,
                     "acc_before": accuracy_before, "acc_after": accuracy_after})  # fmt: skip
    print(f"seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--no_projection", action="store_true", help="Leave out the projection baseline.")
    parser.add_argument("--keep", type=Path, default=None, help="Keep trained models and prune runs here.")
    parser.add_argument("--embed_dim", type=int, default=EMBED_DIM, help="The tiny CLIP's projection size D.")
    parser.add_argument("--fraction", type=float, default=FRACTION, help="N as a fraction of D.")
    parser.add_argument("--theta_quantile", type=float, default=THETA_QUANTILE, help="Θ as a quantile of the MI.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        work = args.keep or Path(temporary)
        rows = [
            row for seed in args.seeds for row in run_seed(seed, work, args.strategies, not args.no_projection, args)
        ]
    for row in rows:
        row["cut"] = 100 * (1 - row["d_after"] / row["d_before"])
        row["drop"] = 100 * (row["acc_before"] - row["acc_after"])
    print(f"\nD = {args.embed_dim}, N = {args.fraction} of D, Θ = the MI's {args.theta_quantile} quantile (val split)")
    print(
        "| seed | method | N removed | abs(d) before | abs(d) after | abs(d) cut % | zero-shot acc before | after | drop (points) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['seed']} | {r['method']} | {r['n']} | {r['d_before']:.3f} | {r['d_after']:.3f} | {r['cut']:.1f} "
              f"| {r['acc_before']:.3f} | {r['acc_after']:.3f} | {r['drop']:+.1f} |")  # fmt: skip
    print(f"\n| method | mean ± sd over seeds {args.seeds}: abs(d) cut % | accuracy drop (points) | abs(d) after |")
    print("|---|---:|---:|---:|")
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        print(f"| {method} | {mean_sd([r['cut'] for r in mine], 3)} | {mean_sd([r['drop'] for r in mine], 3)} "
              f"| {mean_sd([r['d_after'] for r in mine], 3)} |")  # fmt: skip


if __name__ == "__main__":
    main()

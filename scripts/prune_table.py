r"""Effect of post-hoc debiasing on planted bias: train the quickstart tiny CLIP on BiasWorld (strength 0.9) for
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

A second table says how much removing N coordinates *could* cut (:func:`coordinate_shares`): the effect size's
numerator is :math:`(\bar x - \bar y) \cdot (\bar a - \bar b) = \sum_k \delta_k \tau_k` over the coordinates k
(unit embeddings: a word's association is :math:`w \cdot (\bar a - \bar b)`), so removing coordinate k takes
:math:`\delta_k \tau_k` out of it (before re-normalisation). Printed: the share of the numerator held by its N
largest terms, by the N coordinates each strategy removed, and by the N largest terms after a random rotation of
the embedding space (mean over :data:`ROTATIONS` rotations): the share to expect when the bias is not aligned
with the coordinates at all.

A reference row, ``best_on_test``, says how far removing N coordinates can go on this model at all: the N chosen on
the *test* split itself (the split the table judges on), over all D coordinates (no Θ), by local search from greedy
removal and from ``--restarts`` random sets (:func:`best_on_test`), with no regard to accuracy. It is not a method
(it sees the test images), and not a proven optimum (C(64, 6) = 7.5e7 sets); the script prints how many starts
reached it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor

from vlbias.data.biasworld import GROUPS, BiasWorld, group_phrases
from vlbias.mitigation import apply_projection, effect_size_without, orthogonal_projection
from vlbias.mitigation.leave_one_out import kept_dimensions, leave_one_out_effect_sizes
from vlbias.mitigation.pruning import BiasTest, select_dimensions
from vlbias.mitigation.zero_shot import zero_shot_accuracy
from vlbias.prune import biasworld_data, prune
from vlbias.sanity import fit_on_biasworld, mean_sd

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "quickstart.yaml"
STRENGTH, FRACTION, THETA_QUANTILE, EMBED_DIM = 0.9, 0.1, 0.9, 64
STRATEGIES = ("ranked", "greedy", "clip_clip")
ROTATIONS = 200
RESTARTS = 20


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


def coordinate_shares(e: dict, n: int, removed: dict[str, list[int]], seed: int) -> dict[str, float]:
    r"""Percent of the effect size's numerator :math:`\sum_k \delta_k \tau_k` held by its ``n`` largest terms
    (``top``), by each strategy's ``removed`` coordinates, and by the ``n`` largest terms after a random rotation of
    the space (``rotated``: mean over :data:`ROTATIONS` Haar-random rotations, seeded; the sum itself is unchanged
    by a rotation)."""
    delta, tau = e["x"].mean(0) - e["y"].mean(0), e["a"].mean(0) - e["b"].mean(0)  # (D,), (D,)
    terms = delta * tau
    total = terms.sum()
    generator = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(ROTATIONS, len(delta), len(delta), generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    rotations = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar: fix the signs of QR
    rotated_terms = (delta @ rotations) * (tau @ rotations)  # (ROTATIONS, D)
    shares = {
        "top": terms.topk(n).values.sum() / total,
        "rotated": (rotated_terms.topk(n).values.sum(1) / total).mean(),
    }
    shares |= {
        strategy: terms[torch.tensor(dims, dtype=torch.long)].sum() / total for strategy, dims in removed.items()
    }
    return {key: 100 * float(value) for key, value in shares.items()}


def best_on_test(e: dict, n: int, restarts: int, seed: int) -> tuple[list[int], int]:
    """The ``n`` coordinates whose removal lowers |d| on the embedded split ``e`` most, as far as local search finds:
    from greedy removal over all coordinates and from ``restarts`` random sets (seeded), each improved by swaps (while
    some swap of a removed coordinate for a kept one lowers |d|, make the best one; one leave-one-out pass per removed
    coordinate finds all its swaps). Returns the best set found and how many of the ``restarts + 1`` starts reached
    its |d|."""
    x, y, a, b, dim = e["x"], e["y"], e["a"], e["b"], e["x"].shape[1]
    greedy = select_dimensions([BiasTest(e["name"], x, y, a, b)], torch.zeros(dim), n, strategy="greedy", theta=1.0)
    generator = torch.Generator().manual_seed(seed)
    starts = [greedy.removed] + [torch.randperm(dim, generator=generator)[:n].tolist() for _ in range(restarts)]
    found = [_swapped_to_a_local_optimum(x, y, a, b, start) for start in starts]
    best, removed = min(found)
    return sorted(removed), sum(value <= best * (1 + 1e-9) for value, _ in found)


def _swapped_to_a_local_optimum(x: Tensor, y: Tensor, a: Tensor, b: Tensor, removed: list[int]) -> tuple[float, list]:
    """|d| and the removed set after swaps from ``removed`` until no swap lowers |d| (see :func:`best_on_test`)."""
    best = abs(float(effect_size_without(x, y, a, b, torch.tensor(removed))))
    while True:
        swaps = []
        for position in range(len(removed)):
            rest = removed[:position] + removed[position + 1 :]
            kept = kept_dimensions(torch.tensor(rest), x.shape[1])
            psi = leave_one_out_effect_sizes(*(m[:, kept] for m in (x, y, a, b))).abs()
            swaps.append((float(psi.min()), position, int(kept[psi.argmin()])))
        value, position, added = min(swaps)
        # putting back the coordinate just taken out is no swap: its |d| is the current one, computed another way
        if value >= best * (1 - 1e-12) or added == removed[position]:
            return best, removed
        removed, best = removed[:position] + removed[position + 1 :] + [added], value


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
    rows, removed = [], {}
    for strategy in strategies:
        theta = {"theta_quantile": options.theta_quantile} if strategy != "clip_clip" else {}
        outcome = prune(
            "clip", "biasworld", work / f"prune{seed}_{strategy}", checkpoint=str(work / f"fit{seed}" / "model"),
            fraction=options.fraction, strategy=strategy, seed=seed, split="val", biasworld=world_options, **theta,
        )  # fmt: skip
        d_after, accuracy_after = judged(test, outcome["summary"]["removed"])
        removed[strategy] = outcome["summary"]["removed"]
        rows.append({"seed": seed, "method": strategy, "n": outcome["summary"]["n_remove"], "d_before": d_before,
                     "d_after": d_after, "acc_before": accuracy_before, "acc_after": accuracy_after})  # fmt: skip
    n = round(options.fraction * options.embed_dim)
    best, reached = best_on_test(test, n, options.restarts, seed)
    d_after, accuracy_after = judged(test, best)
    rows.append({"seed": seed, "method": "best_on_test", "n": n, "d_before": d_before, "d_after": d_after,
                 "acc_before": accuracy_before, "acc_after": accuracy_after, "reached": reached})  # fmt: skip
    if with_projection:
        d_after, accuracy_after = projected(test)
        rows.append({"seed": seed, "method": "projection", "n": 0, "d_before": d_before, "d_after": d_after,
                     "acc_before": accuracy_before, "acc_after": accuracy_after})  # fmt: skip
    rows.append({"seed": seed, "method": "shares", "n": n} | coordinate_shares(test, n, removed, seed))
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
    parser.add_argument(
        "--restarts", type=int, default=RESTARTS, help="Random starts of best_on_test's search, besides greedy's."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        work = args.keep or Path(temporary)
        rows = [
            row for seed in args.seeds for row in run_seed(seed, work, args.strategies, not args.no_projection, args)
        ]
    shares, rows = [r for r in rows if r["method"] == "shares"], [r for r in rows if r["method"] != "shares"]
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
    reached = ", ".join(f"{r['reached']}" for r in rows if r["method"] == "best_on_test")
    print(f"\nbest_on_test: starts (of {args.restarts + 1}) that reached its abs(d), per seed: {reached}")
    _print_shares(shares, args.strategies)


def _print_shares(shares: list[dict], strategies: list[str]) -> None:
    """The second table of the module docstring: percent of the effect size's numerator, per seed and mean ± sd."""
    columns = ["top", *strategies, "rotated"]
    names = {"top": "N largest terms", "rotated": f"N largest, randomly rotated (mean of {ROTATIONS})"}
    print("\n% of the effect size's numerator sum_k delta_k tau_k (test split) in N coordinates")
    print("| seed | N | " + " | ".join(names.get(c, f"removed by {c}") for c in columns) + " |")
    print("|---:|---:|" + "---:|" * len(columns))
    for r in shares:
        print(f"| {r['seed']} | {r['n']} | " + " | ".join(f"{r[c]:.1f}" for c in columns) + " |")
    print("| mean ± sd | | " + " | ".join(mean_sd([r[c] for r in shares], 1) for c in columns) + " |")


if __name__ == "__main__":
    main()

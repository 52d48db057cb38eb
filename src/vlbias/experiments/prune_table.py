r"""Effect of post-hoc debiasing on planted bias: train the quickstart tiny CLIP on BiasWorld (strength 0.9) for
several seeds, prune 10 % of its embedding dimensions with each strategy, and print a markdown table
(``scripts/prune_table.py``).

Each seed: ``vlbias fit --config configs/experiment/quickstart.yaml`` with bias strength 0.9 and every seed set
(:func:`vlbias.experiments.biasworld_runs.fit_on_biasworld`; no logger, no callbacks), then ``vlbias prune``
(:func:`vlbias.workflows.prune.prune`) of the exported model on BiasWorld's balanced *val* split (Θ = the MI's 0.9 quantile
for ranked and greedy, ``theta_quantile``; N = 10 % of D, ``fraction``), so the dimensions are chosen on other
images than those they are judged on. ``embed_dim`` trains the tiny CLIP with another projection size D (the
paper's CLIP has 512; the quickstart's has 64). Judged on the balanced *test* split: the cross-modal effect size |d|
of the ``mmbias`` suite's test (men vs women against the man- and woman-stereotyped activity phrases) and the
zero-shot activity accuracy, before and after removing the chosen dimensions. ``projection`` is the debias_vl
baseline (Chuang et al., 2023): every text embedding projected orthogonally to BiasWorld's group prompts ("a photo
of a man.", ...), images unchanged.

A second table says how much removing N coordinates *could* cut
(:func:`~vlbias.experiments.prune_diagnostics.coordinate_shares`): the share of the effect size's numerator held by
its N largest terms, by the N coordinates each strategy removed, and by the N largest terms after a random rotation
of the embedding space (mean over 200 rotations).

A reference row, ``best_on_test``, says how far removing N coordinates can go on this model at all: the N chosen on
the *test* split itself (the split the table judges on), over all D coordinates (no Θ), by local search from greedy
removal and from ``restarts`` random sets (:func:`~vlbias.experiments.prune_diagnostics.best_on_test`), with no
regard to accuracy. It is not a method (it sees the test images), and not a proven optimum (C(64, 6) = 7.5e7 sets);
the table prints how many starts reached it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from vlbias.data.biasworld import BiasWorld
from vlbias.experiments.biasworld_runs import experiment_config, fit_on_biasworld
from vlbias.experiments.prune_diagnostics import ROTATIONS, best_on_test, coordinate_shares, embed, judged, projected
from vlbias.experiments.tables import mean_sd
from vlbias.workflows.prune import prune

STRENGTH, EMBED_DIM = 0.9, 64
STRATEGIES = ("ranked", "greedy", "clip_clip")
WORLD_KEYS = ("eval_per_combination", "image_size", "neutral_caption_rate", "hidden_object_rate")


def run_seed(
    seed: int,
    work: Path,
    strategies: Sequence[str],
    projection: bool,
    embed_dim: int,
    fraction: float,
    theta_quantile: float,
    restarts: int,
) -> list[dict]:
    """One seed's rows: train, prune with each strategy (on val), judge each on test; ``best_on_test``, the
    projection (when ``projection``) and the numerator's ``shares``."""
    start = time.perf_counter()
    sizes = ["--model.init_args.model.tiny_sizes", f"{{projection_dim: {embed_dim}}}"]
    quickstart = experiment_config("quickstart")
    cli = fit_on_biasworld(quickstart, STRENGTH, seed, work / f"fit{seed}", sizes if embed_dim != EMBED_DIM else [])
    world = {k: v for k, v in cli.datamodule.world.config.items() if k in WORLD_KEYS}
    world_options = {"bias_strength": STRENGTH, "seed": seed, **world}
    test = embed(cli.model.adapter, BiasWorld(**world_options), "test")
    d_before, accuracy_before = judged(test, [])
    before = {"d_before": d_before, "acc_before": accuracy_before}
    rows, removed = [], {}
    for strategy in strategies:
        theta = {"theta_quantile": theta_quantile} if strategy != "clip_clip" else {}
        outcome = prune(
            "clip", "biasworld", work / f"prune{seed}_{strategy}", checkpoint=str(work / f"fit{seed}" / "model"),
            fraction=fraction, strategy=strategy, seed=seed, split="val", biasworld=world_options, **theta,
        )  # fmt: skip
        d_after, accuracy_after = judged(test, outcome["summary"]["removed"])
        removed[strategy] = outcome["summary"]["removed"]
        rows.append({"seed": seed, "method": strategy, "n": outcome["summary"]["n_remove"], **before,
                     "d_after": d_after, "acc_after": accuracy_after})  # fmt: skip
    n = round(fraction * embed_dim)
    best, reached = best_on_test(test, n, restarts, seed)
    d_after, accuracy_after = judged(test, best)
    rows.append({"seed": seed, "method": "best_on_test", "n": n, **before, "d_after": d_after,
                 "acc_after": accuracy_after, "reached": reached})  # fmt: skip
    if projection:
        d_after, accuracy_after = projected(test)
        rows.append({"seed": seed, "method": "projection", "n": 0, **before, "d_after": d_after,
                     "acc_after": accuracy_after})  # fmt: skip
    rows.append({"seed": seed, "method": "shares", "n": n} | coordinate_shares(test, n, removed, seed))
    print(f"seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows


def prune_table(
    seeds: Sequence[int] = (0, 1, 2),
    strategies: Sequence[Literal[STRATEGIES]] = STRATEGIES,
    projection: bool = True,
    keep: Path | None = None,
    embed_dim: int = EMBED_DIM,
    fraction: float = 0.1,
    theta_quantile: float = 0.9,
    restarts: int = 20,
) -> list[dict]:
    """Train the quickstart CLIP per seed, prune it with each strategy and print the tables.

    Returns the rows, the numerator's ``shares`` among them.

    Args:
        seeds: Seeds to train (one model each).
        strategies: Pruning strategies to compare.
        projection: Include the projection baseline (--projection false leaves it out).
        keep: Keep trained models and prune runs here.
        embed_dim: The tiny CLIP's projection size D.
        fraction: N as a fraction of D.
        theta_quantile: Θ as a quantile of the MI.
        restarts: Random starts of best_on_test's search, besides greedy's.
    """
    seeds, strategies = list(seeds), list(strategies)
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(keep or temporary)
        rows = [
            row
            for seed in seeds
            for row in run_seed(seed, work, strategies, projection, embed_dim, fraction, theta_quantile, restarts)
        ]
    shares, judged_rows = [r for r in rows if r["method"] == "shares"], [r for r in rows if r["method"] != "shares"]
    for row in judged_rows:
        row["cut"] = 100 * (1 - row["d_after"] / row["d_before"])
        row["drop"] = 100 * (row["acc_before"] - row["acc_after"])
    print(f"\nD = {embed_dim}, N = {fraction} of D, Θ = the MI's {theta_quantile} quantile (val split)")
    _print_rows(judged_rows, seeds)
    reached = ", ".join(f"{r['reached']}" for r in judged_rows if r["method"] == "best_on_test")
    print(f"\nbest_on_test: starts (of {restarts + 1}) that reached its abs(d), per seed: {reached}")
    _print_shares(shares, strategies)
    return rows


def _print_rows(rows: list[dict], seeds: list[int]) -> None:
    """The first table, per seed and method, then its mean ± sd over the seeds."""
    print(
        "| seed | method | N removed | abs(d) before | abs(d) after | abs(d) cut % | zero-shot acc before | after | drop (points) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['seed']} | {r['method']} | {r['n']} | {r['d_before']:.3f} | {r['d_after']:.3f} | {r['cut']:.1f} "
              f"| {r['acc_before']:.3f} | {r['acc_after']:.3f} | {r['drop']:+.1f} |")  # fmt: skip
    print(f"\n| method | mean ± sd over seeds {seeds}: abs(d) cut % | accuracy drop (points) | abs(d) after |")
    print("|---|---:|---:|---:|")
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        print(f"| {method} | {mean_sd([r['cut'] for r in mine], 3)} | {mean_sd([r['drop'] for r in mine], 3)} "
              f"| {mean_sd([r['d_after'] for r in mine], 3)} |")  # fmt: skip


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

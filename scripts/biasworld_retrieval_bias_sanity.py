"""Planted bias shows in what is retrieved: train the quickstart CLIP at several bias strengths and seeds and
print the ranking bias (retrieval_bias suite) of its retrievals on BiasWorld's balanced test split.

    python scripts/biasworld_retrieval_bias_sanity.py                      # strengths 0.0 0.9, seeds 0-2
    python scripts/biasworld_retrieval_bias_sanity.py --strengths 0 0.9 --seeds 0 --epochs 6

Each run is ``vlbias fit --config configs/experiment/quickstart.yaml`` with ``--data.init_args.bias_strength``
and the seeds overridden (no logger, no checkpoints, no per-epoch callback; ``--epochs`` overrides
``max_epochs``). The trained model then ranks the 384 balanced test images for the 18 neutral-subject
activity phrases ("a person cooking."), in two groups: the activities stereotyped for men and those
stereotyped for women. Bias@K = (N_man - N_woman) / K per query, averaged over the group's queries: a model
that learned the planted stereotype ranks men first for the men's activities (> 0) and women first for the
women's (< 0). The table reports both, their mean absolute value (``mean abs Bias@K``, the issue's check: larger at
0.9 than at 0.0, on average over the seeds), and MaxSkew@K and NDKL@K over all queries.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from vlbias.sanity import fit_on_biasworld
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "quickstart.yaml"
GROUPS = ("man_stereotyped", "woman_stereotyped")


def train_and_measure(strength: float, seed: int, run_dir: str, epochs: int | None, k: int) -> dict[str, float]:
    overrides = ["--trainer.max_epochs", str(epochs)] if epochs else []
    start = time.perf_counter()
    cli = fit_on_biasworld(QUICKSTART, strength, seed, run_dir, overrides)
    suite = build_suite(
        check_suite_options("retrieval_bias", {"k": k, "statistics": {"n_bootstrap": 1_000}}), cli.datamodule.world
    )
    results, _ = run_suite(suite, cli.model.adapter, model="clip", checkpoint=None, seed=seed, config={})
    metrics = results.metrics
    row = {group: metrics[f"group/{group}/bias@{k}"] for group in GROUPS}
    return row | {
        "abs_bias": statistics.mean(abs(row[group]) for group in GROUPS),
        "max_skew": metrics[f"all/max_skew@{k}"],
        "ndkl": metrics[f"all/ndkl@{k}"],
        "val_accuracy": float(cli.trainer.callback_metrics["val/i2t_accuracy"]),
        "seconds": time.perf_counter() - start,
    }


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):+.3f} ± {sd:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strengths", type=float, nargs="+", default=[0.0, 0.9])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=None, help="Override the config's max_epochs.")
    parser.add_argument("--k", type=int, default=10, help="The cut-off K.")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as run_dir:  # the trained models are exported here, then dropped
        for strength in args.strengths:
            for seed in args.seeds:
                rows.append((strength, seed, train_and_measure(strength, seed, run_dir, args.epochs, args.k)))
                print(f"done: strength {strength}, seed {seed}: {rows[-1][2]}", flush=True)
    k = args.k
    print(
        f"\n| bias_strength | seed | Bias@{k} men's activities | Bias@{k} women's activities | mean abs Bias@{k} "
        f"| MaxSkew@{k} | NDKL@{k} | val i2t accuracy | seconds |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for strength, seed, r in rows:
        print(
            f"| {strength:.2f} | {seed} | {r[GROUPS[0]]:+.3f} | {r[GROUPS[1]]:+.3f} | {r['abs_bias']:.3f} "
            f"| {r['max_skew']:.3f} | {r['ndkl']:.3f} | {r['val_accuracy']:.3f} | {r['seconds']:.0f} |"
        )
    print(f"\nMean ± sd over seeds {', '.join(map(str, args.seeds))}:")
    print(
        f"| bias_strength | Bias@{k} men's activities | Bias@{k} women's activities | mean abs Bias@{k} "
        f"| MaxSkew@{k} | NDKL@{k} |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for strength in args.strengths:
        runs = [r for s, _, r in rows if s == strength]
        cells = " | ".join(mean_sd([r[key] for r in runs]) for key in (*GROUPS, "abs_bias", "max_skew", "ndkl"))
        print(f"| {strength:.2f} | {cells} |")


if __name__ == "__main__":
    main()

"""Planted bias is recovered: train the quickstart model at several bias strengths and seeds
and print the MMBias cross-modal effect size measured on BiasWorld's balanced test split.

    python scripts/biasworld_sanity.py                      # strengths 0.0 0.5 0.9, seeds 0-4
    python scripts/biasworld_sanity.py --strengths 0 0.9 --seeds 0

Each run is ``vlbias fit --config configs/experiment/quickstart.yaml`` with
``--data.init_args.bias_strength`` and ``--seed`` overridden (no logger, no
checkpoints); the effect size is then measured on the test split, the same measure the
quickstart's BiasSuiteCallback logs after every epoch (so the last epoch's number there equals
this table's row for the same strength and seed).
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
METRIC = "man_vs_woman/stereotyped_activities/effect_size"


def train_and_measure(strength: float, seed: int, run_dir: str) -> dict[str, float]:
    start = time.perf_counter()
    cli = fit_on_biasworld(QUICKSTART, strength, seed, run_dir)
    suite = build_suite(
        check_suite_options("mmbias", {"statistics": {"n_permutations": 10_000, "n_bootstrap": 1_000}}),
        cli.datamodule.world,
    )
    results, _ = run_suite(suite, cli.model.adapter, model="clip", checkpoint=None, seed=seed, config={})
    low, high = results.intervals[METRIC]
    return {
        "effect_size": results.metrics[METRIC],
        "ci_low": low,
        "ci_high": high,
        "p_value": results.p_values[METRIC],
        "val_accuracy": float(cli.trainer.callback_metrics["val/i2t_accuracy"]),
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strengths", type=float, nargs="+", default=[0.0, 0.5, 0.9])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as run_dir:  # the trained models are exported here, then dropped
        rows = [(s, seed, train_and_measure(s, seed, run_dir)) for s in args.strengths for seed in args.seeds]
    print("\n| bias_strength | seed | effect size d | 95% CI | p (one-sided) | val accuracy | train s |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for strength, seed, r in rows:
        print(
            f"| {strength:.2f} | {seed} | {r['effect_size']:+.3f} | [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] "
            f"| {r['p_value']:.4f} | {r['val_accuracy']:.3f} | {r['seconds']:.0f} |"
        )
    print("\n| bias_strength | mean d over seeds | min d | max d |")
    print("|---:|---:|---:|---:|")
    for strength in args.strengths:
        ds = [r["effect_size"] for s, _, r in rows if s == strength]
        print(f"| {strength:.2f} | {statistics.mean(ds):+.3f} | {min(ds):+.3f} | {max(ds):+.3f} |")


if __name__ == "__main__":
    main()

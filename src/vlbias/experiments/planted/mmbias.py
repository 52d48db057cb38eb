"""Planted bias is recovered by MMBias: train the quickstart model at several bias strengths and seeds and print
the MMBias cross-modal effect size measured on BiasWorld's balanced test split (``scripts/biasworld_sanity.py``).

Each run is ``vlbias fit --config configs/experiment/quickstart.yaml`` with
``--data.init_args.bias_strength`` and ``--seed`` overridden (no logger, no
checkpoints); the effect size is then measured on the test split, the same measure the
quickstart's BiasSuiteCallback logs after every epoch (so the last epoch's number there equals
this table's row for the same strength and seed).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from vlbias.experiments.biasworld_runs import experiment_config, fit_on_biasworld
from vlbias.experiments.tables import strength_seed_rows
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

METRIC = "man_vs_woman/stereotyped_activities/effect_size"


def train_and_measure(strength: float, seed: int, run_dir: str) -> dict[str, float]:
    """One row: the quickstart model trained at ``strength`` with ``seed``, its effect size with its interval and
    p-value, and its validation accuracy."""
    start = time.perf_counter()
    cli = fit_on_biasworld(experiment_config("quickstart"), strength, seed, run_dir)
    options = check_suite_options("mmbias", {"statistics": {"n_permutations": 10_000, "n_bootstrap": 1_000}})
    suite = build_suite(options, cli.datamodule.world)
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


def sanity_table(strengths: Sequence[float] = (0.0, 0.5, 0.9), seeds: Sequence[int] = (0, 1, 2, 3, 4)) -> list:
    """Train at each strength x seed and print the effect sizes, then their mean per strength.

    Returns the rows, ``(strength, seed, row)``.

    Args:
        strengths: BiasWorld's bias strengths to train at.
        seeds: Seeds to train at each strength.
    """
    rows = strength_seed_rows(train_and_measure, strengths, seeds)
    print("\n| bias_strength | seed | effect size d | 95% CI | p (one-sided) | val accuracy | train s |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for strength, seed, r in rows:
        print(
            f"| {strength:.2f} | {seed} | {r['effect_size']:+.3f} | [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] "
            f"| {r['p_value']:.4f} | {r['val_accuracy']:.3f} | {r['seconds']:.0f} |"
        )
    print("\n| bias_strength | mean d over seeds | min d | max d |")
    print("|---:|---:|---:|---:|")
    for strength in strengths:
        ds = [r["effect_size"] for s, _, r in rows if s == strength]
        print(f"| {strength:.2f} | {statistics.mean(ds):+.3f} | {min(ds):+.3f} | {max(ds):+.3f} |")
    return rows

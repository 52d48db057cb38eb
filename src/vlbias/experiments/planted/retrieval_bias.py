"""Planted bias shows in what is retrieved: train the quickstart CLIP at several bias strengths and seeds and
print the ranking bias (retrieval_bias suite) of its retrievals on BiasWorld's balanced test split
(``scripts/biasworld_retrieval_bias_sanity.py``).

Each run is ``vlbias fit --config configs/experiment/quickstart.yaml`` with ``--data.init_args.bias_strength``
and the seeds overridden (no logger, no checkpoints, no per-epoch callback; ``epochs`` overrides
``max_epochs``). The trained model then ranks the 384 balanced test images for the 18 neutral-subject
activity phrases ("a person cooking."), in two groups: the activities stereotyped for men and those
stereotyped for women. Bias@K = (N_man - N_woman) / K per query, averaged over the group's queries: a model
that learned the planted stereotype ranks men first for the men's activities (> 0) and women first for the
women's (< 0). The table reports both, their mean absolute value (``mean abs Bias@K``, the issue's check: larger at
0.9 than at 0.0, on average over the seeds), and MaxSkew@K and NDKL@K over all queries.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from functools import partial

from jsonargparse.typing import PositiveInt

from vlbias.experiments.biasworld_runs import experiment_config, fit_on_biasworld
from vlbias.experiments.tables import strength_seed_rows
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

GROUPS = ("man_stereotyped", "woman_stereotyped")


def train_and_measure(strength: float, seed: int, run_dir: str, epochs: int | None, k: int) -> dict[str, float]:
    """One row: the quickstart model trained at ``strength`` with ``seed`` (``epochs``: ``None`` keeps the
    config's), its ranking bias at cut-off ``k`` and its validation accuracy."""
    overrides = ["--trainer.max_epochs", str(epochs)] if epochs else []
    start = time.perf_counter()
    cli = fit_on_biasworld(experiment_config("quickstart"), strength, seed, run_dir, overrides)
    options = check_suite_options("retrieval_bias", {"k": k, "statistics": {"n_bootstrap": 1_000}})
    suite = build_suite(options, cli.datamodule.world)
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


def _signed_mean_sd(values: list[float]) -> str:
    """``"+mean ± sd"`` to 3 decimals, the sample standard deviation (0 for one value)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):+.3f} ± {sd:.3f}"


def sanity_table(
    strengths: Sequence[float] = (0.0, 0.9),
    seeds: Sequence[int] = (0, 1, 2),
    epochs: PositiveInt | None = None,
    k: PositiveInt = 10,
) -> list:
    """Train at each strength x seed and print the ranking bias, then its mean ± sd per strength.

    Returns the rows, ``(strength, seed, row)``.

    Args:
        strengths: BiasWorld's bias strengths to train at.
        seeds: Seeds to train at each strength.
        epochs: Override the config's max_epochs.
        k: The cut-off K.
    """
    rows = strength_seed_rows(partial(train_and_measure, epochs=epochs, k=k), strengths, seeds, progress=True)
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
    print(f"\nMean ± sd over seeds {', '.join(map(str, seeds))}:")
    print(
        f"| bias_strength | Bias@{k} men's activities | Bias@{k} women's activities | mean abs Bias@{k} "
        f"| MaxSkew@{k} | NDKL@{k} |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for strength in strengths:
        runs = [r for s, _, r in rows if s == strength]
        cells = " | ".join(_signed_mean_sd([r[key] for r in runs]) for key in (*GROUPS, "abs_bias", "max_skew", "ndkl"))
        print(f"| {strength:.2f} | {cells} |")
    return rows

"""Planted bias is recovered by CounterBias: train a tiny masked-LM ALBEF on BiasWorld at several bias strengths
and seeds and print the CounterBias measures of the activities, measured on BiasWorld's balanced test split
(``scripts/biasworld_counterbias_sanity.py``).

Each run is ``vlbias fit --config configs/experiment/biasworld_mlm.yaml`` with
``--data.init_args.bias_strength`` and the seeds overridden (no logger, no checkpoints, no
per-epoch callback); CounterBias (Zhang et al., 2022) then runs once on the trained model with
the same suite options as the config's callback. ``B@V-L``, ``B@V`` and ``B@L`` are the mean
absolute bias(T) over the six activities in percent, averaged over the four Table 1 templates
(Eq. 6-7, 9, 11; ``activity/<measure>/avg``); ``B@L_log`` is Eq. 13 with no image.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from functools import partial

from jsonargparse.typing import PositiveInt

from vlbias.experiments.biasworld_runs import callback_suite_options, experiment_config, fit_on_biasworld
from vlbias.experiments.tables import strength_seed_rows
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

MEASURES = ("B@V-L", "B@V", "B@L", "B@L_log")


def train_and_measure(strength: float, seed: int, run_dir: str, epochs: int | None) -> dict[str, float]:
    """One row: the masked-LM ALBEF trained at ``strength`` with ``seed`` (``epochs``: ``None`` keeps the config's),
    its CounterBias measures, attack success and validation accuracies."""
    config = experiment_config("biasworld_mlm")
    overrides = ["--trainer.max_epochs", str(epochs)] if epochs else []
    start = time.perf_counter()
    cli = fit_on_biasworld(config, strength, seed, run_dir, overrides)
    trained = time.perf_counter() - start
    options = check_suite_options("counterbias", callback_suite_options(config, "counterbias"))
    suite = build_suite(options, cli.datamodule.world)
    results, _ = run_suite(suite, cli.model.adapter, model="albef", checkpoint=None, seed=seed, config={})
    metrics = cli.trainer.callback_metrics
    row = {measure: results.metrics[f"activity/{measure}/avg"] for measure in MEASURES}
    return row | {
        "attack_success_rate": results.metrics["attack_success_rate"],
        "n_items": results.n_items,
        "val_group_accuracy": float(metrics["val/group_accuracy"]),
        "val_activity_accuracy": float(metrics["val/key_word_accuracy"]),  # the activities are the key words
        "train_s": trained,
        "measure_s": time.perf_counter() - start - trained,
    }


def sanity_table(
    strengths: Sequence[float] = (0.0, 0.5, 0.9), seeds: Sequence[int] = (0, 1, 2), epochs: PositiveInt | None = None
) -> list:
    """Train at each strength x seed and print the CounterBias measures, then their means per strength.

    Returns the rows, ``(strength, seed, row)``.

    Args:
        strengths: BiasWorld's bias strengths to train at.
        seeds: Seeds to train at each strength.
        epochs: Override the config's max_epochs.
    """
    rows = strength_seed_rows(partial(train_and_measure, epochs=epochs), strengths, seeds, progress=True)
    header = " | ".join(MEASURES)
    print(
        f"\n| bias_strength | seed | {header} | attack success | items measured | val acc group / activity | train s | measure s |"
    )
    print("|---:|---:|" + "---:|" * len(MEASURES) + "---:|---:|---|---:|---:|")
    for strength, seed, r in rows:
        values = " | ".join(f"{r[m]:.2f}" for m in MEASURES)
        print(
            f"| {strength:.2f} | {seed} | {values} | {r['attack_success_rate']:.2f} | {r['n_items']} "
            f"| {r['val_group_accuracy']:.2f} / {r['val_activity_accuracy']:.2f} | {r['train_s']:.0f} | {r['measure_s']:.0f} |"
        )
    means_header = " | ".join(f"mean {m}" for m in MEASURES)
    print(f"\n| bias_strength | {means_header} | min B@V-L | max B@V-L |")
    print("|---:|" + "---:|" * len(MEASURES) + "---:|---:|")
    for strength in strengths:
        runs = [r for s, _, r in rows if s == strength]
        means = " | ".join(f"{statistics.mean(r[m] for r in runs):.2f}" for m in MEASURES)
        vl = [r["B@V-L"] for r in runs]
        print(f"| {strength:.2f} | {means} | {min(vl):.2f} | {max(vl):.2f} |")
    return rows

"""Planted bias shows in zero-shot classification: train the quickstart CLIP at several bias strengths and seeds and
print how well it classifies the activity of BiasWorld's balanced test images, per gender and for the stereotyped
and counter-stereotypical images (zero_shot_fairness suite; ``scripts/biasworld_zero_shot_fairness_sanity.py``).

Each run is ``vlbias fit --config configs/experiment/quickstart.yaml`` with ``--data.init_args.bias_strength``, the
seeds and ``--data.init_args.hidden_object_rate`` overridden (no logger, no checkpoints, no per-epoch callback;
``epochs`` overrides ``max_epochs``). With the activity's object hidden in a share of the images, a model can only
guess those images' activity, and a model that learned the planted stereotype guesses the group's stereotyped
activity: the counter-stereotypical images are then classified worse than the stereotyped ones. The table reports
the accuracy of both (``stereotype/group/.../accuracy``), their signed difference (stereotyped minus
counter-stereotypical, ``difference``), the suite's unsigned gap (``stereotype/worst_group_gap``: their mean minus the
worse), and the equal-opportunity gap between men and women (``gender/equal_opportunity_gap_max``: the largest
difference over the activities of the share of a group's images of the activity classified as it). Expected: the
difference larger at 0.9 than at 0.0, on average over the seeds (at 0.0 a seed may favour either side, which the
unsigned gap does not show).
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

#: row key -> the suite's metric it is
METRICS = {
    "stereotyped": "stereotype/group/stereotyped/accuracy",
    "counter": "stereotype/group/counter_stereotyped/accuracy",
    "gap": "stereotype/worst_group_gap",
    "gender_gap": "gender/equal_opportunity_gap_max",
    "accuracy": "accuracy",
}
#: the table's columns: the metrics and ``difference``, stereotyped minus counter-stereotypical accuracy
COLUMNS = ("stereotyped", "counter", "difference", "gap", "gender_gap", "accuracy")


def train_and_measure(strength: float, seed: int, run_dir: str, epochs: int | None, hidden: float) -> dict[str, float]:
    """One row: the quickstart model trained at ``strength`` with ``seed`` (``epochs``: ``None`` keeps the config's)
    and a share ``hidden`` of images without their object, measured by the zero_shot_fairness suite."""
    overrides = ["--data.init_args.hidden_object_rate", str(hidden)]
    overrides += ["--trainer.max_epochs", str(epochs)] if epochs else []
    start = time.perf_counter()
    cli = fit_on_biasworld(experiment_config("quickstart"), strength, seed, run_dir, overrides)
    options = check_suite_options("zero_shot_fairness", {"statistics": {"n_bootstrap": 200}})
    suite = build_suite(options, cli.datamodule.world)
    results, _ = run_suite(suite, cli.model.adapter, model="clip", checkpoint=None, seed=seed, config={})
    row = {key: results.metrics[name] for key, name in METRICS.items()}
    return row | {"difference": row["stereotyped"] - row["counter"], "seconds": time.perf_counter() - start}


def sanity_table(
    strengths: Sequence[float] = (0.0, 0.9),
    seeds: Sequence[int] = (0, 1, 2),
    epochs: PositiveInt | None = None,
    hidden: float = 0.8,
) -> list:
    """Train at each strength x seed and print the zero-shot accuracies and gaps, then their means per strength.

    Returns the rows, ``(strength, seed, row)``.

    Args:
        strengths: BiasWorld's bias strengths to train at.
        seeds: Seeds to train at each strength.
        epochs: Override the config's max_epochs.
        hidden: Share of images drawn without their activity object.
    """
    rows = strength_seed_rows(partial(train_and_measure, epochs=epochs, hidden=hidden), strengths, seeds, progress=True)
    header = "| bias_strength | seed | acc. stereotyped | acc. counter-stereotypical | difference | gap | gender EO gap max | accuracy | seconds |"  # fmt: skip
    print(f"\n{header}\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for strength, seed, r in rows:
        cells = " | ".join(f"{r[key]:.3f}" for key in COLUMNS)
        print(f"| {strength:.2f} | {seed} | {cells} | {r['seconds']:.0f} |")
    print(f"\nMean over seeds {', '.join(map(str, seeds))}:\n| bias_strength | {' | '.join(COLUMNS)} |")
    print("|---:|" + "---:|" * len(COLUMNS))
    for strength in strengths:
        runs = [r for s, _, r in rows if s == strength]
        print(f"| {strength:.2f} | {' | '.join(f'{statistics.mean(r[key] for r in runs):.3f}' for key in COLUMNS)} |")
    return rows

"""Every registered debiaser against no method on BiasWorld's planted bias, over seeds
(``scripts/debias_table.py``; the table of ``docs/results/debiasing.md``).

The protocol, fixed before any number was seen:

* per seed, the quickstart model (a tiny CLIP, ``configs/experiment/quickstart.yaml``) is trained on BiasWorld with
  planted bias ``strength`` (0.9) and that seed, and saved;
* ``vlbias debias --method all`` (:func:`vlbias.debias.debias`) fits every registered method on the world's ``val``
  split (the same data and seed for every method: :mod:`vlbias.mitigation.fit_data`), and measures the model before
  and after each on the world's balanced ``test`` split: the MMBias cross-modal effect size of man vs woman images
  against man- vs woman-stereotyped activities (``mmbias``), the gender skew of what neutral activity queries
  retrieve (``retrieval_bias``), the zero-shot activity classifier's accuracy per gender (``zero_shot_fairness``),
  and the zero-shot activity accuracy over all test images;
* every method is in the table whatever its rank; a method that cannot be fitted on BiasWorld's data is listed with
  the reason. Each number is the mean over seeds with the standard deviation and the t-interval of that mean over
  the seeds (:func:`~vlbias.metrics.functional.t_interval.t_interval`), so the interval is over independently
  trained models, not over the items of one.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.debias import debias
from vlbias.experiments.biasworld_runs import experiment_config, fit_on_biasworld
from vlbias.metrics.functional.t_interval import t_interval
from vlbias.run_options import DebiasOptions

SUITES = ("mmbias", "retrieval_bias", "zero_shot_fairness")
#: column -> (the comparison row's key, what it measures); bias first, then accuracy.
COLUMNS = {
    "MMBias d": ("mmbias/man_vs_woman/stereotyped_activities/effect_size", "cross-modal effect size, 0 is fair"),
    "MaxSkew@10": ("retrieval_bias/all/max_skew@10", "gender skew of neutral activity queries' top 10, 0 is fair"),
    "gender gap": ("zero_shot_fairness/gender/worst_group_gap", "zero-shot accuracy: mean minus worst gender"),
    "accuracy": ("zero_shot_accuracy", "zero-shot activity accuracy, all test images"),
}
STATISTICS = {"mmbias": {"statistics": {"n_permutations": 2000, "n_bootstrap": 500}}}


def seed_rows(seed: int, strength: float, run_dir: Path) -> list[dict]:
    """The comparison rows of one seed: the quickstart model trained at ``strength`` with ``seed``, then every
    method fitted and measured on that seed's world."""
    cli = fit_on_biasworld(experiment_config("quickstart"), strength, seed, run_dir / "fit")
    checkpoint = run_dir / "model"
    cli.model.adapter.save_pretrained(checkpoint)
    world = BiasWorldOptions(**cli.datamodule.world.config)  # the world the model was trained in
    options = DebiasOptions(
        method="all",
        model="clip",
        checkpoint=str(checkpoint),
        seed=seed,
        out=str(run_dir / "debias"),
        suites=list(SUITES),
        suite_options=STATISTICS,
        biasworld=world,
    )
    return debias(options)["comparison"]


def summarise(rows: dict[int, list[dict]]) -> list[dict]:
    """Per method (in the order of the first seed's rows): each column's mean, sd and t-interval over the seeds
    where the method was fitted (``n_seeds``), and why it was not fitted where it was not."""
    methods = [row["method"] for row in next(iter(rows.values()))]
    table = []
    for method in methods:
        found = [row for seed_rows in rows.values() for row in seed_rows if row["method"] == method]
        entry: dict[str, object] = {"method": method, "not_fitted": found[0].get("not_fitted") or ""}
        for column, (key, _) in COLUMNS.items():
            values = [float(row[key]) for row in found if _number(row.get(key))]
            entry[column] = values
        entry["n_seeds"] = len(entry["accuracy"])
        table.append(entry)
    return table


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "—"
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:+.3f}"
    low, high = t_interval(torch.tensor(values)).tolist()
    return f"{mean:+.3f} ± {statistics.stdev(values):.3f} [{low:+.3f}, {high:+.3f}]"


def debias_table(seeds: Sequence[int] = (0, 1, 2, 3, 4), strength: float = 0.9, out: str | None = None) -> list:
    """Train, fit every method and measure, per seed; print the per-method table (mean ± sd [95% t-interval over
    seeds]). Returns the summary rows.

    Args:
        seeds: Seeds: one trained model, one BiasWorld world and one fit of every method each.
        strength: BiasWorld's planted bias strength in training.
        out: Folder to keep each seed's run in (a temporary folder when not given).
    """
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(out or temporary)
        rows = {seed: seed_rows(seed, strength, root / f"seed{seed}") for seed in seeds}
    table = summarise(rows)
    print(f"\nBiasWorld, planted bias {strength}, seeds {list(seeds)}: mean ± sd [95% t-interval over seeds]\n")
    print("| method | " + " | ".join(COLUMNS) + " | seeds |")
    print("|---|" + "---|" * len(COLUMNS) + "---:|")
    for entry in table:
        cells = [_cell(entry[column]) for column in COLUMNS]
        note = f" (not fitted: {entry['not_fitted']})" if entry["not_fitted"] else ""
        print(f"| {entry['method']}{note} | " + " | ".join(cells) + f" | {entry['n_seeds']} |")
    print("\n" + "\n".join(f"- {column}: {what} (`{key}`)" for column, (key, what) in COLUMNS.items()))
    return table

"""Planted bias shows in caption selection: train the quickstart model at several bias strengths and seeds on a
BiasWorld where a share of the images hide their activity object, then print VLStereoSet's vlrs, vlbs and ivlas
measured on the balanced test split (``scripts/biasworld_vlstereoset_sanity.py``).

Each run is ``vlbias fit --config configs/experiment/quickstart.yaml`` with
``--data.init_args.bias_strength``, ``--data.init_args.hidden_object_rate`` and the seeds
overridden (no logger, no checkpoints). vlbs is measured on the test split's counter-stereotypical
images, overall and separately on those whose object is visible and those whose object is hidden
(where the model can only guess the activity from the group).
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
from vlbias.suites.run import run_suite
from vlbias.suites.vlstereoset import VLStereoSetSuite

OPTIONS = {"statistics": {"n_bootstrap": 1_000}, "shift": False}


def train_and_measure(
    strength: float, seed: int, run_dir: str, hidden: float, unrelated: str, epochs: int
) -> dict[str, float]:
    """One row: the quickstart model trained at ``strength`` with ``seed`` on images of which a share ``hidden``
    hide their object; vlrs, vlbs and ivlas on all test images, and on those whose object is visible or hidden."""
    start = time.perf_counter()
    cli = fit_on_biasworld(
        experiment_config("quickstart"),
        strength,
        seed,
        run_dir,
        ["--data.init_args.hidden_object_rate", str(hidden), "--trainer.max_epochs", str(epochs)],
    )
    world = cli.datamodule.world
    suite = VLStereoSetSuite.from_biasworld(
        world, check_suite_options("vlstereoset", {**OPTIONS, "unrelated": unrelated})
    )
    probes, visible = list(suite.items), [item.object_visible for item in world.items("test")]
    row = {}
    for subset, keep in (("all", None), ("visible", True), ("hidden", False)):
        suite.items = [probe for probe, seen in zip(probes, visible) if keep is None or seen == keep]
        if not suite.items:
            continue
        results, _ = run_suite(suite, cli.model.adapter, model="clip", checkpoint=None, seed=seed, config={})
        for name in ("vlrs", "vlbs", "ivlas"):
            row[f"{subset}/{name}"] = results.metrics.get(name, float("nan"))
        if keep is None:
            row["vlbs_low"], row["vlbs_high"] = results.intervals["vlbs"]
    row["seconds"] = time.perf_counter() - start
    return row


def sanity_table(
    strengths: Sequence[float] = (0.0, 0.5, 0.9),
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    hidden_object_rate: float = 0.5,
    epochs: PositiveInt = 12,
    unrelated: str = "photo",
) -> list:
    """Train at each strength x seed and print the caption-selection scores, then vlbs per strength.

    Returns the rows, ``(strength, seed, row)``.

    Args:
        strengths: BiasWorld's bias strengths to train at.
        seeds: Seeds to train at each strength.
        hidden_object_rate: The share of BiasWorld's images that hide their activity object.
        epochs: Training epochs (the quickstart's 12).
        unrelated: The irrelevant caption's word (S_i).
    """
    measure = partial(train_and_measure, hidden=hidden_object_rate, unrelated=unrelated, epochs=epochs)
    rows = strength_seed_rows(measure, strengths, seeds)
    print(f"\nhidden_object_rate = {hidden_object_rate}, unrelated = {unrelated!r}, epochs = {epochs}; scores in %")
    print(
        "| bias_strength | seed | vlrs | vlbs (95% CI) | ivlas | vlbs, object visible | vlbs, object hidden | train s |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|")
    for strength, seed, r in rows:
        print(
            f"| {strength:.2f} | {seed} | {r['all/vlrs']:.1f} | {r['all/vlbs']:.1f} [{r['vlbs_low']:.1f}, {r['vlbs_high']:.1f}] "
            f"| {r['all/ivlas']:.1f} | {r.get('visible/vlbs', float('nan')):.1f} | {r.get('hidden/vlbs', float('nan')):.1f} "
            f"| {r['seconds']:.0f} |"
        )
    print("\n| bias_strength | mean vlbs | min | max | mean vlbs, object hidden |")
    print("|---:|---:|---:|---:|---:|")
    for strength in strengths:
        vlbs = [r["all/vlbs"] for s, _, r in rows if s == strength]
        hidden = [r.get("hidden/vlbs", float("nan")) for s, _, r in rows if s == strength]
        print(
            f"| {strength:.2f} | {statistics.mean(vlbs):.1f} | {min(vlbs):.1f} | {max(vlbs):.1f} | {statistics.mean(hidden):.1f} |"
        )
    return rows

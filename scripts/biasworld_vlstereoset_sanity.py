"""Planted bias shows in caption selection: train the quickstart model at several bias strengths
and seeds on a BiasWorld where a share of the images hide their activity object, then print
VLStereoSet's vlrs, vlbs and ivlas measured on the balanced test split.

    python scripts/biasworld_vlstereoset_sanity.py                 # strengths 0.0 0.5 0.9, seeds 0-4
    python scripts/biasworld_vlstereoset_sanity.py --strengths 0 0.9 --seeds 0 --hidden_object_rate 0.3

Each run is ``vlbias fit --config configs/experiment/quickstart.yaml`` with
``--data.init_args.bias_strength``, ``--data.init_args.hidden_object_rate`` and the seeds
overridden (no logger, no checkpoints). vlbs is measured on the test split's counter-stereotypical
images, overall and separately on those whose object is visible and those whose object is hidden
(where the model can only guess the activity from the group).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from vlbias.sanity import fit_on_biasworld
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import run_suite
from vlbias.suites.vlstereoset import VLStereoSetSuite

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "quickstart.yaml"
OPTIONS = {"statistics": {"n_bootstrap": 1_000}, "shift": False}


def train_and_measure(
    strength: float, hidden: float, unrelated: str, epochs: int, seed: int, run_dir: str
) -> dict[str, float]:
    start = time.perf_counter()
    cli = fit_on_biasworld(
        QUICKSTART,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strengths", type=float, nargs="+", default=[0.0, 0.5, 0.9])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--hidden_object_rate", type=float, default=0.5)
    parser.add_argument("--epochs", type=int, default=12, help="training epochs (the quickstart's 12)")
    parser.add_argument("--unrelated", default="photo", help="the irrelevant caption's word (S_i)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as run_dir:
        rows = [
            (s, seed, train_and_measure(s, args.hidden_object_rate, args.unrelated, args.epochs, seed, run_dir))
            for s in args.strengths
            for seed in args.seeds
        ]
    print(
        f"\nhidden_object_rate = {args.hidden_object_rate}, unrelated = {args.unrelated!r}, epochs = {args.epochs};"
        " scores in %"
    )
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
    for strength in args.strengths:
        vlbs = [r["all/vlbs"] for s, _, r in rows if s == strength]
        hidden = [r.get("hidden/vlbs", float("nan")) for s, _, r in rows if s == strength]
        print(
            f"| {strength:.2f} | {statistics.mean(vlbs):.1f} | {min(vlbs):.1f} | {max(vlbs):.1f} | {statistics.mean(hidden):.1f} |"
        )


if __name__ == "__main__":
    main()

"""Planted bias is recovered end to end: quickstart models trained on BiasWorld at bias strength
0.9 measure, on average over five seeds, as more biased than at 0.0, in the MMBias cross-modal
effect size and in VLStereoSet's vlbs (a BiasWorld where half the images hide their activity
object, so that the bias can show in caption selection).

Ten full training runs (about 25 s each on an idle 2-core machine), hence ``slow``. Single seeds
are not compared: vlbs of one tiny model varies by tens of points between seeds (the README's
table from ``scripts/biasworld_vlstereoset_sanity.py``).
"""

import statistics
from pathlib import Path

import pytest

from vlbias.measure import build_suite, run_suite
from vlbias.sanity import fit_on_biasworld

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "quickstart.yaml"
EFFECT_SIZE = "man_vs_woman/stereotyped_activities/effect_size"


SEEDS = (0, 1, 2, 3, 4)


def measured(strength: float, seed: int, run_dir: Path) -> dict[str, float]:
    cli = fit_on_biasworld(QUICKSTART, strength, seed, run_dir, ["--data.init_args.hidden_object_rate", "0.5"])
    out = {}
    for suite_name, options, key in (
        ("mmbias", {"n_permutations": 1_000, "n_bootstrap": 200}, EFFECT_SIZE),
        ("vlstereoset", {"n_bootstrap": 200, "shift": False}, "vlbs"),
    ):
        suite = build_suite(suite_name, cli.datamodule.world, options)
        results, _ = run_suite(suite, cli.model.adapter, model="clip", checkpoint=None, seed=seed, config={})
        out[suite_name] = results.metrics[key]
    return out


@pytest.mark.slow
def test_bias_planted_in_training_is_measured(tmp_path):
    runs = {strength: [measured(strength, seed, tmp_path) for seed in SEEDS] for strength in (0.0, 0.9)}
    mean = {s: {k: statistics.mean(run[k] for run in rs) for k in rs[0]} for s, rs in runs.items()}
    assert mean[0.9]["mmbias"] > mean[0.0]["mmbias"] + 0.3, runs
    assert mean[0.9]["vlstereoset"] > mean[0.0]["vlstereoset"] + 10.0, runs  # percentage points

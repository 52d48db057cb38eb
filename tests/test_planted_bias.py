"""Planted bias is recovered end to end: quickstart models trained on BiasWorld at bias strength
0.9 measure, on average over five seeds, as more biased than at 0.0, in the MMBias cross-modal
effect size and in VLStereoSet's vlbs. BiasWorld hides the activity object in some images, so
that the bias can show in caption selection: half of them for MMBias, 80 % for VLStereoSet.

Why two settings: at 50 % hidden, vlbs at 0.9 splits between seeds that learn the gender shortcut
and seeds that barely do (on one thread, seeds 0-7: means 22.6 at 0.0 and 32.1 at 0.9, single seeds
17.2-62.0 at 0.9), so a five-seed mean difference of 10 points failed on that machine. At 80 %
the seeds agree more: seeds 0-4 gave vlbs 0.0-40.1 (mean 17.7) at 0.0 and 40.1-66.1 (mean 50.6) at
0.9. MMBias's d, in turn, is stable at 50 % (about +1.9 for every seed at 0.9, mean -0.33 over
seeds 0-7 at 0.0) but swings to +-1.9 at 0.0 when 80 % of the objects are hidden.

Twenty full training runs (about 25-40 s each on a 2-core machine), hence ``slow``. Single seeds
are not compared: the measures of one tiny model vary widely between seeds (the tables of docs/results/planted-bias.md).
"""

import statistics
from pathlib import Path

import pytest

from vlbias.experiments.biasworld_runs import fit_on_biasworld
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "quickstart.yaml"
SEEDS = (0, 1, 2, 3, 4)
MEASURES = {  # suite: (options, metric, share of images whose activity object is hidden)
    "mmbias": (
        {"statistics": {"n_permutations": 1_000, "n_bootstrap": 200}},
        "man_vs_woman/stereotyped_activities/effect_size",
        0.5,
    ),
    "vlstereoset": ({"statistics": {"n_bootstrap": 200}, "shift": False}, "vlbs", 0.8),
}


def measured(suite_name: str, strength: float, seed: int, run_dir: Path) -> float:
    options, metric, hidden_object_rate = MEASURES[suite_name]
    cli = fit_on_biasworld(
        QUICKSTART, strength, seed, run_dir, ["--data.init_args.hidden_object_rate", str(hidden_object_rate)]
    )
    suite = build_suite(check_suite_options(suite_name, options), cli.datamodule.world)
    results, _ = run_suite(suite, cli.model.adapter, model="clip", checkpoint=None, seed=seed, config={})
    return results.metrics[metric]


def seed_means(suite_name: str, run_dir: Path) -> tuple[dict[float, float], dict[float, list[float]]]:
    runs = {strength: [measured(suite_name, strength, seed, run_dir) for seed in SEEDS] for strength in (0.0, 0.9)}
    return {strength: statistics.mean(values) for strength, values in runs.items()}, runs


@pytest.mark.slow
def test_bias_planted_in_training_is_measured_by_mmbias(tmp_path):
    mean, runs = seed_means("mmbias", tmp_path)
    assert mean[0.9] > mean[0.0] + 0.3, runs  # effect size d


@pytest.mark.slow
def test_bias_planted_in_training_is_measured_by_vlstereoset(tmp_path):
    mean, runs = seed_means("vlstereoset", tmp_path)
    assert mean[0.9] > mean[0.0] + 10.0, runs  # percentage points

"""Planted bias is recovered by CounterBias end to end: a tiny masked-LM ALBEF trained on BiasWorld
(``configs/experiment/biasworld_mlm.yaml``) at bias strength 0.9 has a larger mean absolute
bias_V-L (Eq. 6-7, Table 2) over the activities than one trained at 0.0.

Two training runs of about two minutes each, hence ``slow``. One seed per strength suffices here: over
seeds 0-2 the smallest B@V-L at 0.9 (15.7 %) is 1.7 times the largest at 0.0 (9.2 %), the table of docs/results/planted-bias.md
from ``scripts/biasworld_counterbias_sanity.py`` on BiasWorld after its training-split fix (commit 88c7e64);
seed 0 gives 8.4 % and 15.7 %.
"""

from pathlib import Path

import pytest

from vlbias.experiments.biasworld_runs import callback_suite_options, fit_on_biasworld
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "biasworld_mlm.yaml"


def bias_vl(strength: float, run_dir: Path) -> float:
    cli = fit_on_biasworld(CONFIG, strength, 0, run_dir)
    suite = build_suite(
        check_suite_options("counterbias", callback_suite_options(CONFIG, "counterbias")), cli.datamodule.world
    )
    results, _ = run_suite(suite, cli.model.adapter, model="albef", checkpoint=None, seed=0, config={})
    assert results.n_items > 0
    return results.metrics["activity/B@V-L/avg"]


@pytest.mark.slow
def test_bias_planted_in_training_is_measured_by_counterbias(tmp_path):
    unbiased, biased = bias_vl(0.0, tmp_path / "0.0"), bias_vl(0.9, tmp_path / "0.9")
    assert biased > 1.5 * unbiased, (unbiased, biased)

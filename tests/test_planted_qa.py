"""scripts/planted_qa.py's table end to end at its smallest (one strength, one seed, one epoch of eight questions),
and its options refused in one line before any run. The table itself (15 runs) is docs/results/planted-qa.md."""

import json
import math

import pytest

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.biasworld_qa import MEASURES, planted_qa_table


def test_the_smallest_table_runs_and_writes_its_rows(tmp_path, capsys):
    out = tmp_path / "rows.json"
    rows = planted_qa_table(strengths=[0.5], seeds=[0], split="val", epochs=1, n_train=8, n_bootstrap=20, workers=1,
                            out=out)  # fmt: skip
    assert json.loads(out.read_text()) == rows and len(rows) == 1
    assert all(math.isfinite(rows[0][key]) or math.isnan(rows[0][key]) for key, _ in MEASURES)
    assert -1 <= rows[0]["gap"] <= 1 and 0 <= rows[0]["accuracy_dis"] <= 1
    printed = capsys.readouterr().out
    assert "| 0.50 | 0 |" in printed and "counterfactual gap" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--strengths", "0.5", "1.5"], "Expected option `--strengths` to be a number v>=0 and v<=1"),
        (["--template", "{question}"], "Expected `template` to hold {question} and {options}"),
        (["--split", "train"], "--split"),
    ],
)
def test_bad_options_are_refused_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        run(planted_qa_table, argv)
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1 and message in error

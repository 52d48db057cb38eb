"""``vlbias report`` over inputs it cannot use as they are: a ``metrics.csv`` with a non-numeric cell or with
``nan``/``inf``, a ``prune.json`` that is a JSON array, a ``tradeoff.csv`` with ``n/a``, and ``--accuracy`` or
``--bias`` naming a column no input has. Each is named (the file and column, or the option) in the report's
problems and in one ``vlbias: error:`` line, exit status 2, no traceback; the rest is reported."""

import json

import pytest

from vlbias.report import build_report

HEADER = "epoch,step,val/accuracy,bias/mmbias/t/effect_size"


def run(tmp_path, name: str, text: str):
    """A run folder holding one file ``name`` with ``text``."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / name).write_text(text)
    return folder


def refused(tmp_path, run_cli, folder, *options) -> tuple[str, str]:
    """The console's error line and the written report's Markdown, checking the exit status and that nothing but
    the report's path was printed."""
    code, out, err = run_cli(["report", str(folder), "--out", str(tmp_path / "out"), *options])
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("vlbias: error: ") and err.count("\n") == 1, err
    assert out.startswith("wrote ") and out.count("\n") == 1  # the report is written, with its problems
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Problems with the inputs" in report
    return err, report


def test_a_non_numeric_cell_of_metrics_csv_is_named_and_left_out(tmp_path, run_cli):
    folder = run(tmp_path, "metrics.csv", f"{HEADER}\n0,10,0.5,0.3\n1,20,abc,0.2\n2,30,0.7,0.1\n")
    err, report = refused(tmp_path, run_cli, folder)
    assert str(folder / "metrics.csv") in err and "'val/accuracy'" in err and "'abc' (line 3)" in err
    assert "'abc' (line 3)" in report
    assert "## Bias over epochs" in report and "## Bias against accuracy" in report  # the other cells are reported


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_a_non_finite_value_in_metrics_csv_is_named(tmp_path, run_cli, value):
    folder = run(tmp_path, "metrics.csv", f"{HEADER}\n0,10,0.5,0.3\n1,20,0.6,{value}\n2,30,,0.1\n")
    err, report = refused(tmp_path, run_cli, folder)
    assert "'bias/mmbias/t/effect_size'" in err and f"{value!r} (line 3)" in err
    assert "val/accuracy" not in err  # an empty cell is a value a row did not log, not a problem


def test_a_prune_json_that_is_an_array_is_named(tmp_path, run_cli):
    folder = run(tmp_path, "prune.json", json.dumps([{"model": "clip"}]))
    err, report = refused(tmp_path, run_cli, folder)
    assert str(folder / "prune.json") in err and "expected a JSON object" in err and "list" in err


def test_a_prune_json_whose_effect_sizes_are_not_numbers_is_named(tmp_path, run_cli):
    summary = {"model": "clip", "effect_sizes_before": {"t": "big"}, "effect_sizes_after": {"t": 0.1}}
    folder = run(tmp_path, "prune.json", json.dumps(summary))
    err, _ = refused(tmp_path, run_cli, folder)
    assert "`effect_sizes_before`" in err and "object of numbers" in err and '"big"' in err


def test_n_a_in_a_pruning_tradeoff_csv_is_named(tmp_path, run_cli):
    table = "n_removed,t/effect_size,zero_shot_accuracy\n0,0.5,0.6\n1,n/a,0.55\n2,0.2,0.5\n"
    folder = run(tmp_path, "tradeoff.csv", table)
    err, report = refused(tmp_path, run_cli, folder)
    assert str(folder / "tradeoff.csv") in err and "'t/effect_size'" in err and "'n/a' (line 3)" in err
    assert "| run | n_removed 2 |" in report  # the readable rows are still on the Pareto table


@pytest.mark.parametrize(
    ("option", "value", "found"),
    [
        ("--accuracy", "val/nope", "the accuracy columns of its 1 epoch or pruning table(s): val/accuracy"),
        ("--bias", "[bias/mmbias/t/effect_size, bias/x/y]", "the bias columns of its 1 epoch or pruning table(s)"),
    ],
)
def test_a_column_no_input_has_is_named(tmp_path, run_cli, option, value, found):
    folder = run(tmp_path, "metrics.csv", f"{HEADER}\n0,10,0.5,0.3\n1,20,0.6,0.2\n")
    err, report = refused(tmp_path, run_cli, folder, option, value)
    missing = value.strip("[]").split(", ")[-1]
    assert f"{option} {missing}: no input has column {missing!r}" in err and found in err
    assert f"| {option} {missing} |" in report


def test_a_column_asked_of_results_only_says_there_is_no_table(tmp_path):
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "metrics.csv").write_text(f"{HEADER}\n0,10,0.5,0.3\n")
    report = build_report([tmp_path / "fit"], tmp_path / "out", accuracy="val/accuracy")
    assert report.problems == []  # a column that exists is no problem
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "audit.json").write_text(json.dumps({"entries": []}))
    report = build_report([tmp_path / "audit"], tmp_path / "out2", accuracy="val/accuracy")
    assert report.problems == [
        ("--accuracy val/accuracy", "no input has column 'val/accuracy': the inputs hold no epoch or pruning table "
         "(metrics.csv, tradeoff.csv)")
    ]  # fmt: skip

"""The console script: subcommands, the measure contract, and one-line errors for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlbias.commands import COMMANDS
from vlbias.results import read_items, read_results
from vlbias.runtime.environment import environment

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"
SMALL_WORLD = [
    "--biasworld.eval_per_combination",
    "2",
    "--suite_options",
    "{statistics: {n_permutations: 200, n_bootstrap: 50}}",
]


def run_subprocess(argv):
    """Run ``vlbias argv`` as a user would, in a fresh process (Lightning's logging handlers
    outlive in-process runs); return (exit code, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "vlbias.cli", *argv], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def assert_one_line_error(result, *fragments):
    code, _, err = result
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error" in line.lower()]
    assert lines, err
    for fragment in fragments:
        assert fragment in err, err


def test_top_level_help_lists_every_subcommand(run_cli):
    code, out, _ = run_cli(["--help"])
    assert code == 0
    for name, command in COMMANDS.items():
        assert f"  {name:<12} {command.help}" in out


def test_models_json_lists_clip_with_embed(run_cli):
    code, out, _ = run_cli(["models", "--json"])
    assert code == 0
    models = {m["name"]: m["capabilities"] for m in json.loads(out)}
    assert "embed" in models["clip"]


def test_measure_writes_the_results_schema(tmp_path, run_cli):
    argv = [
        "measure",
        "--suite",
        "mmbias",
        "--model",
        "clip",
        "--tiny",
        "--data",
        "biasworld",
        "--out",
        str(tmp_path),
        "--seed",
        "7",
    ]
    code, out, err = run_cli(argv + SMALL_WORLD)
    assert code == 0, err
    results = read_results(tmp_path / "mmbias.json")
    assert results.suite == "mmbias" and results.model == "clip" and results.seed == 7
    metric = "man_vs_woman/stereotyped_activities/effect_size"
    counts = {"n_skipped/empty": 0.0, "n_skipped/unknown": 0.0, "n_truncated": 0.0}  # every word seen whole
    assert results.metrics.keys() == {metric, *counts} and results.metrics.items() >= counts.items()
    assert -2 <= results.metrics[metric] <= 2
    low, high = results.intervals[metric]
    assert low <= high and 0 <= results.p_values[metric] <= 1
    assert results.config["biasworld"]["eval_per_combination"] == 2
    assert results.config["device"] == "cpu" and results.config["autocast"] is None  # float32 on CPU
    assert results.config["environment"] == environment("cpu")  # the machine a number belongs to
    items = read_items(tmp_path / "mmbias.json")
    assert items.loc[0, "n_x"] == 12 and items.loc[0, "n_a"] == 9
    assert metric in out and "wrote" in out


def test_measure_is_deterministic(tmp_path, run_cli):
    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--data", "biasworld"]
    for name in ("a", "b"):
        assert run_cli(argv + ["--out", str(tmp_path / name)] + SMALL_WORLD)[0] == 0
    first, second = (read_results(tmp_path / name / "mmbias.json") for name in ("a", "b"))
    assert (first.metrics, first.intervals, first.p_values) == (second.metrics, second.intervals, second.p_values)


def test_measure_missing_data_path(tmp_path, run_cli):
    argv = [
        "measure",
        "--suite",
        "mmbias",
        "--model",
        "clip",
        "--tiny",
        "--data",
        str(tmp_path / "nowhere"),
        "--out",
        str(tmp_path / "o"),
    ]
    assert_one_line_error(run_cli(argv), "Data path", "nowhere' does not exist")


def test_measure_negative_bias_strength(tmp_path, run_cli):
    argv = [
        "measure",
        "--suite",
        "mmbias",
        "--model",
        "clip",
        "--tiny",
        "--out",
        str(tmp_path),
        "--biasworld.bias_strength",
        "-0.5",
    ]
    assert_one_line_error(run_cli(argv), "`--biasworld.bias_strength` to be a number v>=0 and v<=1 but got -0.5")


def test_measure_unwritable_output(tmp_path, run_cli):
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--out", str(blocker / "out")]
    assert_one_line_error(run_cli(argv), "Output directory", "is not writable")


def test_measure_unknown_suite_and_model(tmp_path, run_cli):
    base = ["measure", "--tiny", "--out", str(tmp_path)]
    assert_one_line_error(run_cli(base + ["--suite", "nope", "--model", "clip"]), "Unknown suite 'nope'", "mmbias")
    assert_one_line_error(run_cli(base + ["--suite", "mmbias", "--model", "nope"]), "Unknown model 'nope'", "clip")


def test_fit_config_with_unknown_key(tmp_path, run_cli):
    config = tmp_path / "bad.yaml"
    config.write_text(QUICKSTART.read_text().replace("  max_epochs: 12", "  max_epochs: 12\n  max_epoks: 3"))
    assert_one_line_error(run_cli(["fit", "--config", str(config)]), "max_epoks")


def test_fit_negative_bias_strength(run_cli):
    argv = [
        "fit",
        "--config",
        str(QUICKSTART),
        "--data.init_args.bias_strength",
        "-1",
        "--trainer.fast_dev_run",
        "true",
    ]
    assert_one_line_error(run_cli(argv), "`bias_strength` in [0, 1] but got -1")


def test_fit_unwritable_output_directory(tmp_path, run_cli):
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = [
        "fit",
        "--config",
        str(QUICKSTART),
        "--trainer.logger.init_args.save_dir",
        str(blocker / "runs"),
        "--trainer.max_epochs",
        "1",
    ]
    assert_one_line_error(run_cli(argv), "cannot write or read", "file/runs", "Not a directory")


def test_subcommand_help_is_short_and_useful(run_cli):
    code, out, _ = run_cli(["measure", "--help"])
    assert code == 0
    for option in ("--suite", "--model", "--checkpoint", "--tiny", "--data", "--out", "--biasworld.bias_strength"):
        assert option in out
    assert "BiasWorld, the synthetic world read when the data is 'biasworld'" in out and "<function" not in out
    assert "  mmbias: MMBias" in out and "    statistics.n_permutations " in out  # every suite and option: hardening


@pytest.mark.slow  # a fit in a new Python: ~15 s on 2 cores
def test_fit_prints_no_lightning_tips_or_args_warning():
    argv = ["fit", "--config", str(QUICKSTART), "--trainer.fast_dev_run", "true", "--trainer.logger", "false"]
    code, out, err = run_subprocess(argv)
    assert code == 0, err
    for noise in ("💡 Tip", "args parameter is intended", "is deprecated"):
        assert noise not in out + err


def test_ctrl_c_ends_with_one_line_and_status_130(run_cli, monkeypatch):
    import vlbias.commands.models

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(vlbias.commands.models, "main", interrupted)
    code, _, err = run_cli(["models"])
    assert code == 130 and err.strip() == "vlbias: interrupted; results already written are intact."

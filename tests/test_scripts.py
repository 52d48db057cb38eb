"""``scripts/`` holds entry points only: each is ``run(function)`` of a function in :mod:`vlbias.experiments`, whose
command line (:func:`vlbias.experiments.command_line.parser_for`) has one option per parameter, each with the help
its docstring gives. The scripts are read as text here, never imported."""

import ast
import importlib
import inspect
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from vlbias.experiments.bench.models import bench_models
from vlbias.experiments.command_line import parser_for, run

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.py"))


def entry_function(path: Path):
    """The function the script hands to ``run``, found in its imports."""
    tree = ast.parse(path.read_text())
    (called,) = [
        node.args[0].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run"
    ]
    (module,) = [
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and any(alias.name == called for alias in node.names)
    ]
    return getattr(importlib.import_module(module), called)


def test_the_scripts_are_found():
    assert {"fairvlp_table", "prune_table", "retrieval_table", "bench_models"} <= {path.stem for path in SCRIPTS}


@pytest.mark.parametrize("path", SCRIPTS, ids=[path.stem for path in SCRIPTS])
def test_a_script_is_a_short_entry_point_whose_options_each_have_help(path):
    assert len(path.read_text().splitlines()) <= 80
    function = entry_function(path)
    assert function.__module__.startswith("vlbias.experiments.")
    parser = parser_for(function)
    options = [action for action in parser._actions if action.dest != "help"]
    assert [action.dest for action in options] == list(inspect.signature(function).parameters)
    assert all(action.help and action.option_strings[0] == f"--{action.dest}" for action in options)
    usage = parser.format_help()
    assert all(usage.count(f"  --{action.dest} ") + usage.count(f"  --{action.dest},") == 1 for action in options)


def _count_options() -> list[tuple[Path, str]]:
    """Every script option that counts something (``PositiveInt``): images, steps, repeats, workers."""
    return [
        (path, name)
        for path in SCRIPTS
        for name, parameter in inspect.signature(entry_function(path)).parameters.items()
        if "PositiveInt" in str(parameter.annotation)
    ]


@pytest.mark.parametrize("path, option", _count_options(), ids=lambda value: getattr(value, "stem", value))
def test_a_count_below_one_is_refused_in_one_line_before_anything_runs(path, option, capsys):
    with pytest.raises(SystemExit) as stopped:
        run(entry_function(path), [f"--{option}", "0"])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1
    assert f"Expected option `--{option}` to be an integer v>0" in error and error.endswith("but got 0.\n")


def table(seeds: Sequence[int] = (0, 1), strength: float = 0.9, quiet: bool = False, out: Path | None = None) -> dict:
    """A table.

    Args:
        seeds: Seeds to run.
        strength: Bias strength.
        quiet: Print nothing.
        out: Write here.
    """
    return {"seeds": seeds, "strength": strength, "quiet": quiet, "out": out}


def test_options_take_the_parameters_types_and_defaults():
    assert run(table, []) == {"seeds": [0, 1], "strength": 0.9, "quiet": False, "out": None}
    assert run(table, ["--seeds", "3", "--strength", "0", "--quiet", "--out", "rows.json"]) == {
        "seeds": [3],
        "strength": 0.0,
        "quiet": True,
        "out": Path("rows.json"),
    }


def test_a_flag_is_bare_or_takes_true_or_false_as_in_the_vlbias_commands(capsys):
    assert run(table, ["--quiet", "false"])["quiet"] is False
    assert run(table, ["--quiet", "true", "--strength", "0.5"])["quiet"] is True
    with pytest.raises(SystemExit) as stopped:
        run(table, ["--no_quiet"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.endswith("error: --no_quiet is now written --quiet false.\n")


def test_a_parameter_without_help_is_refused():
    def undocumented(seeds: int = 0) -> None:
        """No Args section."""

    with pytest.raises(TypeError, match=r"parameter `seeds` has no line under `Args:`"):
        parser_for(undocumented)


def test_a_bad_value_and_a_renamed_option_end_with_one_error_line(capsys):
    with pytest.raises(SystemExit) as stopped:
        run(table, ["--strength", "strong"])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1 and "`--strength` to be a number but got strong" in error
    with pytest.raises(SystemExit) as stopped:
        run(bench_models, ["--batch-size", "2"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.endswith("error: --batch-size was renamed; write --batch_size.\n")


@pytest.mark.slow  # a table script in a new Python: ~12 s on 2 cores
def test_a_script_runs_from_the_command_line():
    script = next(path for path in SCRIPTS if path.stem == "retrieval_table")
    done = subprocess.run(
        [sys.executable, str(script), "--levels_only", "--seeds", "0"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("test split, seed 0: 48 images, IR R@1 by chance 2.1;")

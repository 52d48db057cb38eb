"""A result (``<suite>.json`` + ``<suite>.items.parquet``) is replaced as a unit: a writer killed with SIGKILL at
any step leaves the old result whole or the new one whole, never a mix, and the next write into the directory
tidies what the killed one left. The measured numbers are checked before anything is written."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vlbias.results import read_items, read_results

# A writer of one result (seed S, one item row "S") that SIGKILLs itself just before its K-th os.replace
# (K = 0: never). write_results renames three times: the staged item table into place under its staged name,
# the JSON over the old one (the commit), the staged table over <suite>.items.parquet.
WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from vlbias.results import Results, write_results

    out, seed, kill_at, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    replace, calls = os.replace, []

    def replace_or_die(source, target):
        calls.append(target)
        if len(calls) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        replace(source, target)

    os.replace = replace_or_die
    results = Results(suite=name, model="clip", checkpoint=None, config={}, seed=seed, n_items=1,
                      metrics={"t/effect_size": seed / 10})
    write_results(out, results, [{"run": str(seed)}])
    """
)


def write(out, seed, kill_at=0, name="mmbias"):
    """Run the writer in a fresh process; its return code (-9 when it killed itself)."""
    return subprocess.run([sys.executable, "-c", WRITER, str(out), str(seed), str(kill_at), name]).returncode


def result(out, name="mmbias"):
    """(seed in the JSON, run in the item table) of the result in ``out``."""
    path = out / f"{name}.json"
    return read_results(path).seed, read_items(path)["run"].tolist()


@pytest.mark.parametrize(
    ("kill_at", "seen"),
    [
        (1, (1, ["1"])),  # inside the staged table's atomic write: the old result
        (2, (1, ["1"])),  # inside the JSON's atomic write: the old result
        (3, (2, ["2"])),  # after the commit, before the table's last rename: the new result, whole
    ],
)
def test_a_kill_at_any_step_leaves_one_whole_result_and_the_next_write_tidies(tmp_path, kill_at, seen):
    assert write(tmp_path, seed=1) == 0
    assert write(tmp_path, seed=2, kill_at=kill_at) == -9
    assert result(tmp_path) == seen
    assert {p.name for p in tmp_path.iterdir()} > {"mmbias.json", "mmbias.items.parquet"}  # leftovers
    assert write(tmp_path, seed=3) == 0
    assert result(tmp_path) == (3, ["3"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mmbias.items.parquet", "mmbias.json"]


def test_a_write_of_another_suite_finishes_a_killed_commit(tmp_path):
    """Killed after its JSON was committed: the next write into the folder, of any suite, renames the staged
    table into place, so ``<suite>.items.parquet`` itself is the new one."""
    assert write(tmp_path, seed=1) == 0
    assert write(tmp_path, seed=2, kill_at=3) == -9
    assert write(tmp_path, seed=5, name="weat") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mmbias.items.parquet",
        "mmbias.json",
        "weat.items.parquet",
        "weat.json",
    ]
    assert result(tmp_path) == (2, ["2"]) and result(tmp_path, "weat") == (5, ["5"])
    named = json.loads((tmp_path / "mmbias.json").read_text())["items"]
    assert named["file"] == "mmbias.items.parquet" and len(named["sha256"]) == 64


def test_a_first_write_killed_before_its_commit_leaves_no_result(tmp_path):
    assert write(tmp_path, seed=1, kill_at=2) == -9
    assert not (tmp_path / "mmbias.json").exists() and not (tmp_path / "mmbias.items.parquet").exists()
    assert write(tmp_path, seed=2) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mmbias.items.parquet", "mmbias.json"]


def test_an_overflowed_metric_is_refused_through_the_cli_and_the_old_result_stays(tmp_path, run_cli, monkeypatch):
    """``vlbias measure`` whose suite gives an absurd number (what a VLStereoSet temperature of 1e-300 gave:
    lmss/mean = -6.91e+296): exit 2, one line naming the metric and its value, the old files untouched."""
    import vlbias.workflows.measure

    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--data", "biasworld", "--out", str(tmp_path)]
    argv += [
        "--biasworld.eval_per_combination",
        "2",
        "--suite_options",
        "{statistics: {n_permutations: 20, n_bootstrap: 10}}",
    ]
    code, _, err = run_cli(argv)
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    run_suite = vlbias.workflows.measure.run_suite

    def overflowing(*args, **kwargs):
        results, items = run_suite(*args, **kwargs)
        results.metrics["lmss/mean"] = -6.91e296
        return results, items

    monkeypatch.setattr(vlbias.workflows.measure, "run_suite", overflowing)
    code, _, err = run_cli(argv)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("vlbias: error: ") and str(tmp_path / "mmbias.json") in err
    assert "metric 'lmss/mean' is -6.91e+296, beyond ±1e+12" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize(("interrupt_at", "seed_seen"), [(2, 1), (3, 2)])
def test_ctrl_c_while_writing_ends_in_one_line_and_one_whole_result(
    tmp_path, run_cli, monkeypatch, interrupt_at, seed_seen
):
    """Ctrl-C (KeyboardInterrupt) at the JSON's rename leaves the old result; at the table's last rename, the
    new one whole. Either way: exit status 130 and one line, no traceback."""
    argv = ["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--data", "biasworld", "--out", str(tmp_path)]
    argv += [
        "--biasworld.eval_per_combination",
        "2",
        "--suite_options",
        "{statistics: {n_permutations: 20, n_bootstrap: 10}}",
    ]
    assert run_cli([*argv, "--seed", "1"])[0] == 0
    replace, renames = os.replace, []

    def replace_or_interrupt(source, target):
        if Path(target).parent == tmp_path:
            renames.append(target)
            if len(renames) == interrupt_at:
                raise KeyboardInterrupt
        replace(source, target)

    monkeypatch.setattr(os, "replace", replace_or_interrupt)
    code, _, err = run_cli([*argv, "--seed", "2"])
    assert code == 130 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("vlbias: interrupted")
    monkeypatch.setattr(os, "replace", replace)
    results = read_results(tmp_path / "mmbias.json")
    assert results.seed == seed_seen and not read_items(tmp_path / "mmbias.json").empty  # the table it names

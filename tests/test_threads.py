"""Thread control: ``vlbias measure --threads``, its default (the usable CPUs over the node's processes), the
number recorded in the results, and the process's setting restored after a library call."""

import torch

from vlbias.results import read_results
from vlbias.runtime.threads import available_cpus, default_threads

SMALL = [
    "--biasworld.eval_per_combination",
    "1",
    "--suite_options",
    "{statistics: {n_permutations: 200, n_bootstrap: 50}}",
]


def measure_argv(out, *extra):
    return [
        "measure",
        "--suite",
        "mmbias",
        "--model",
        "clip",
        "--tiny",
        "--data",
        "biasworld",
        "--out",
        str(out),
        *SMALL,
        *extra,
    ]


def test_threads_are_set_recorded_and_restored(run_cli, tmp_path):
    before = torch.get_num_threads()
    code, _, err = run_cli(measure_argv(tmp_path / "one", "--threads", "2"))
    assert code == 0, err
    assert read_results(tmp_path / "one" / "mmbias.json").config["threads"] == 2
    assert torch.get_num_threads() == before
    code, _, err = run_cli(measure_argv(tmp_path / "default"))
    assert code == 0, err
    assert read_results(tmp_path / "default" / "mmbias.json").config["threads"] == default_threads()


def test_a_bad_thread_count_is_refused_by_name(run_cli, tmp_path):
    code, _, err = run_cli(measure_argv(tmp_path / "out", "--threads", "0"))
    assert code == 2 and "Expected option `--threads` to be an integer v>0 or null but got 0" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out" / "mmbias.json").exists()


def test_the_default_shares_the_cpus_among_the_processes_of_the_node(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own setting wins
    assert default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert default_threads() == max(1, available_cpus() // 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(10 * available_cpus()))
    assert default_threads() == 1

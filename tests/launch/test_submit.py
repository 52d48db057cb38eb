"""vlbias slurm submit/sweep without a cluster: the rendered script, the trainer-vs-job checks, the quoting."""

import importlib
import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

submit_module = importlib.import_module("vlbias.launch.submit")


HERE = Path(__file__).parent
BORING = HERE / "boring.yaml"
GPU_2X8 = [
    "--trainer.num_nodes", "2", "--trainer.devices", "8", "--trainer.accelerator", "gpu",
    "--nodes", "2", "--gpus_per_node", "8", "--cpus_per_task", "8", "--mem", "256G", "--time", "04:00:00",
    "--partition", "gpu", "--account", "bias lab", "--signal_seconds", "120",
    "--extra_sbatch", "#SBATCH --constraint=a100",
    "--setup", "module load cuda/12.4", "--setup", "source /opt/venvs/vlbias/bin/activate",
    "--python", "python",
]  # fmt: skip


@pytest.fixture
def no_sbatch(monkeypatch):
    """Fail the test if anything would call sbatch."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"sbatch must not be called: {args}")

    monkeypatch.setattr(submit_module, "sbatch", refuse)


def test_dry_run_of_2_nodes_x_8_gpus_matches_the_fixture_line_by_line(run_cli, tmp_path, no_sbatch):
    code, out, err = run_cli(
        ["slurm", "submit", "--config", str(BORING), *GPU_2X8, "--run_dir", str(tmp_path / "run"), "--dry_run"]
    )
    assert code == 0, err
    expected = (HERE / "dry_run_2x8.sbatch").read_text().replace("{tmp}", str(tmp_path)).splitlines()
    actual = out.splitlines()
    for number, (want, got) in enumerate(zip(expected, actual), start=1):
        assert got == want, f"line {number}: expected {want!r} but got {got!r}"
    assert len(actual) == len(expected), f"expected {len(expected)} lines but got {len(actual)}"
    assert not (tmp_path / "run").exists()  # a dry run writes nothing


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--trainer.devices", "8", "--ntasks_per_node", "4"], ("trainer.devices is 8", "--ntasks_per_node 4")),
        (["--trainer.num_nodes", "2", "--nodes", "1"], ("trainer.num_nodes is 2", "--nodes 1")),
        (
            ["--trainer.accelerator", "gpu", "--gpus_per_node", "0"],
            ("trainer.accelerator is 'gpu'", "--gpus_per_node 0"),
        ),
    ],
    ids=["devices-vs-tasks", "num_nodes-vs-nodes", "gpu-without-gpus"],
)
def test_a_job_that_disagrees_with_the_trainer_is_refused_before_sbatch(run_cli, tmp_path, no_sbatch, extra, named):
    code, out, err = run_cli(["slurm", "submit", "--config", str(BORING), *extra, "--run_dir", str(tmp_path / "r")])
    assert code == 2
    assert err.startswith("vlbias: error: ") and len(err.strip().splitlines()) == 1, err
    for value in named:
        assert value in err
    assert not (tmp_path / "r").exists()


def test_no_value_reaches_the_shell_unquoted(run_cli, tmp_path, monkeypatch):
    """A run directory, account and config value holding ``$(...)``, backticks and quotes: the config value
    stays in config.yaml; the script, run by bash with a fake srun, passes the path through as one argument
    and runs nothing; sbatch reads the directives back as the values given."""
    hostile = "$(touch PWNED) `touch PWNED` 'single' \"double\" ; rm -rf /"
    run_dir = tmp_path / f"run {hostile}".replace("/", "_")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    srun = fake_bin / "srun"
    srun.write_text('#!/bin/bash\nfor arg in "$@"; do printf "%s\\n" "$arg"; done > "$ARGS_FILE"\n')
    sbatch = fake_bin / "sbatch"
    sbatch.write_text("#!/bin/bash\necho 42\n")
    for tool in (srun, sbatch):
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    code, out, err = run_cli(
        ["slurm", "submit", "--config", str(BORING), "--trainer.logger.init_args.name", hostile, "--account", hostile,
         "--python", "python", "--run_dir", str(run_dir)]
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[-1] == "42"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["trainer"]["logger"]["init_args"]["name"] == hostile
    script = (run_dir / "job.sbatch").read_text()
    directives = [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]
    assert all(len(shlex.split(directive)) == 1 for directive in directives), directives  # one word each
    assert f"--account={hostile}" in [shlex.split(directive)[0] for directive in directives]
    assert f"--output={run_dir}/slurm-%j.out" in [shlex.split(directive)[0] for directive in directives]
    args_file = tmp_path / "srun.args"
    subprocess.run(["bash", str(run_dir / "job.sbatch")], cwd=tmp_path, env=os.environ | {"ARGS_FILE": str(args_file)},
                   check=True)  # fmt: skip
    assert args_file.read_text().splitlines() == ["python", "-m", "vlbias.commands.job", str(run_dir), "fit"]
    assert not any(tmp_path.rglob("PWNED"))


def test_a_sweep_writes_one_resolved_config_per_task(run_cli, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(submit_module, "sbatch", lambda script: calls.append(script) or "77")
    code, out, err = run_cli(
        ["slurm", "sweep", "--config", str(BORING), "--grid", "trainer.max_steps=2,3", "--seeds", "0", "1",
         "--max_parallel", "2", "--run_dir", str(tmp_path / "sweep")]
    )  # fmt: skip
    assert code == 0, err
    assert calls == [tmp_path / "sweep" / "job.sbatch"] and out.splitlines()[-1] == "77"
    assert "#SBATCH --array=0-3%2" in (tmp_path / "sweep" / "job.sbatch").read_text()
    seen = []
    for index in range(4):
        config = yaml.safe_load((tmp_path / "sweep" / f"task-{index:03d}" / "config.yaml").read_text())
        seen.append((config["trainer"]["max_steps"], config["seed"]))
    assert seen == [(2, 0), (2, 1), (3, 0), (3, 1)]


def test_a_bad_grid_and_a_bad_job_option_are_one_line_errors(run_cli, tmp_path, no_sbatch):
    code, _, err = run_cli(["slurm", "sweep", "--config", str(BORING), "--grid", "trainer.max_steps", "--dry_run"])
    assert code == 2 and "--grid KEY=V1,V2" in err and "'trainer.max_steps'" in err
    code, _, err = run_cli(["slurm", "submit", "--config", str(BORING), "--time", "soon", "--dry_run"])
    assert code == 2 and "`time`" in err and "'soon'" in err


def test_a_job_config_with_a_misspelt_key_and_a_misspelt_flag_get_the_closest_names(run_cli, tmp_path, no_sbatch):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("partiton: gpu\n")
    code, out, err = run_cli(["slurm", "submit", "--job_config", str(cluster), "--config", str(BORING), "--dry_run"])
    assert (code, out) == (2, "") and err.count("\n") == 1 and "did you mean `partition`?" in err, err
    code, out, err = run_cli(["slurm", "sweep", "--config", str(BORING), "--grid", "trainer.max_step=4", "--dry_run"])
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "`--trainer.max_step`" in err and "did you mean `--trainer.max_steps`" in err, err


def test_every_job_option_has_its_help_text(run_cli):
    code, out, _ = run_cli(["slurm", "submit", "--help"])
    assert code == 0
    assert "Memory per node (--mem), e.g. 64G." in " ".join(out.split())
    assert "--dry_run" in out and "--grid" not in out


def test_a_sweep_dry_run_lists_each_array_index_with_its_grid_point(run_cli, tmp_path, no_sbatch):
    code, out, err = run_cli(
        ["slurm", "sweep", "--config", str(BORING), "--grid", "trainer.max_steps=2,3", "--seeds", "0", "1",
         "--dry_run"]
    )  # fmt: skip
    assert code == 0, err
    listed = [line for line in out.splitlines() if line.startswith("task-")]
    assert listed == [
        "task-000: trainer.max_steps=2 seed=0",
        "task-001: trainer.max_steps=2 seed=1",
        "task-002: trainer.max_steps=3 seed=0",
        "task-003: trainer.max_steps=3 seed=1",
    ]

"""vlbias slurm on a real (local, single-node) Slurm cluster: requeues that lose nothing, DDP under srun,
a sweep as a job array. Marked ``slurm``; run with ``python -m pytest -m slurm`` after slurm/install.sh."""

import json
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from vlbias.cli import main
from vlbias.launch import run_status
from vlbias.launch.job import wandb_run_id

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"
SLURM_TRAINER = ROOT / "configs" / "trainer" / "slurm.yaml"
EFFECT = "bias/mmbias/man_vs_woman/stereotyped_activities/effect_size"
pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

# The quickstart shrunk to seconds: 12 steps over 2 epochs of 6 batches, a bias measurement per epoch.
SMALL = [
    "--trainer.accelerator", "cpu", "--trainer.max_epochs", "2", "--trainer.max_steps", "12",
    "--trainer.log_every_n_steps", "1", "--trainer.enable_progress_bar", "false",
    "--data.init_args.n_train", "48", "--data.init_args.batch_size", "8", "--data.init_args.eval_per_combination", "1",
]  # fmt: skip


def _callbacks_and_loggers(tmp_path: Path, slow_seconds: float, wandb: bool) -> Path:
    """A config delta: a cheap bias callback, slow steps (so a signal lands mid-epoch), CSV (+ W&B) loggers."""
    callbacks = [
        {
            "class_path": "vlbias.callbacks.BiasSuiteCallback",
            "init_args": {
                "suites": [{"suite": "mmbias", "options": {"statistics": {"n_permutations": 200, "n_bootstrap": 20}}}]
            },
        },
        {"class_path": "tests.launch.slow_steps.SlowSteps", "init_args": {"seconds": slow_seconds}},
    ]
    loggers = [{"class_path": "vlbias.loggers.CSVLogger", "init_args": {"save_dir": "runs"}}]
    if wandb:
        loggers.append({"class_path": "vlbias.loggers.WandbLogger", "init_args": {"project": "vlbias-test"}})
    path = tmp_path / f"delta-{slow_seconds}-{wandb}.yaml"
    path.write_text(yaml.safe_dump({"trainer": {"callbacks": callbacks, "logger": loggers}}))
    return path


def _submit(run_cli, run_dir: Path, *extra: str, action: str = "submit") -> str:
    code, out, err = run_cli(["slurm", action, "--run_dir", str(run_dir), *extra])
    assert code == 0, err
    return out.splitlines()[-1]


def _scontrol(job: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, check=True).stdout
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


def _wait_for(predicate, what: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def _finished(job: str) -> bool:
    return _scontrol(job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


def _training(run_dir: Path, job: str) -> bool:
    """Whether the job is past its first training step; raises when it ended before (its output attached)."""
    if (run_dir / f"job-{job}" / "training.started").exists():
        return True
    if _finished(job):
        output = (run_dir / f"slurm-{job}.out").read_text()
        raise AssertionError(f"job {job} ended before training: {_scontrol(job)['JobState']}\n{output[-3000:]}")
    return False


def _final_checkpoint(job_dir: Path) -> dict:
    (path,) = (job_dir / "checkpoints").glob("*.ckpt")
    return torch.load(path, map_location="cpu", weights_only=False)


@pytest.fixture
def in_repo(monkeypatch):
    """Jobs start in the submitting directory: the repository, so that tests.launch.slow_steps imports."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("WANDB_MODE", "offline")  # sbatch passes the environment on to the job


def test_requeued_fit_resumes_from_its_hpc_checkpoint_and_loses_no_step(run_cli, tmp_path, in_repo):
    slow = _callbacks_and_loggers(tmp_path, slow_seconds=0.5, wandb=True)
    args = ["--config", str(QUICKSTART), "--config", str(SLURM_TRAINER), "--config", str(slow), *SMALL]
    reference = _submit(run_cli, tmp_path / "reference", *args)
    signalled = _submit(run_cli, tmp_path / "usr1", *args)
    requeued = _submit(run_cli, tmp_path / "requeue", *args)

    _wait_for(lambda: _training(tmp_path / "usr1", signalled), "usr1 to train")
    subprocess.run(["scancel", "--signal=USR1", signalled], check=True)  # to the srun step, where Lightning is
    _wait_for(lambda: _training(tmp_path / "requeue", requeued), "requeue to train")
    subprocess.run(["scontrol", "requeue", requeued], check=True)  # SIGTERM only: no checkpoint, starts over
    for job in (reference, signalled, requeued):
        _wait_for(lambda job=job: _finished(job), f"job {job} to end", timeout=300)

    expected = _final_checkpoint(tmp_path / "reference" / f"job-{reference}")
    for name, job in (("usr1", signalled), ("requeue", requeued)):
        job_dir = tmp_path / name / f"job-{job}"
        state = _scontrol(job)
        assert (state["JobState"], int(state["Restarts"]) >= 1) == ("COMPLETED", True), f"{name}: {state}"
        events = [json.loads(line) for line in (job_dir / "attempts.jsonl").read_text().splitlines()]
        ends = [event["outcome"] for event in events if event["event"] == "end"]
        assert ends == (["requeued", "finished"] if name == "usr1" else ["stopped", "finished"]), f"{name}: {ends}"
        assert not list(job_dir.glob("hpc_ckpt_*.ckpt"))  # a finished job's HPC checkpoints are cleaned
        assert _final_checkpoint(job_dir)["global_step"] == expected["global_step"] == 12
        metrics = pd.read_csv(job_dir / "metrics.csv")
        for column in ("train/loss", "val/loss", EFFECT):
            steps = metrics.dropna(subset=[column])["step"]
            assert not steps.duplicated().any(), f"{name}: {column} logged twice at steps {steps[steps.duplicated()]}"
        (task,) = run_status(tmp_path / name)
        assert (task.outcome, task.requeues, task.resumed) == ("finished", 1, int(name == "usr1")), task.summary
    usr1 = tmp_path / "usr1" / f"job-{signalled}"
    output = (tmp_path / "usr1" / f"slurm-{signalled}.out").read_text()
    assert f"Restored all states from the checkpoint at {usr1}/hpc_ckpt_1.ckpt" in output
    run_ids = {re.sub(r"^offline-run-\d{8}_\d{6}-", "", path.name) for path in (usr1 / "wandb").glob("offline-run-*")}
    assert len(list((usr1 / "wandb").glob("offline-run-*"))) == 2 and run_ids == {wandb_run_id(usr1)}
    # scontrol requeue without a checkpoint starts over, and the USR1 run resumes mid-epoch where it stopped (its
    # training loader replays the epoch: vlbias.data.resumable): both train as the reference did
    for name, job in (("usr1", signalled), ("requeue", requeued)):
        restarted = _final_checkpoint(tmp_path / name / f"job-{job}")["state_dict"]
        for key, value in expected["state_dict"].items():
            torch.testing.assert_close(
                restarted[key], value, atol=1e-6, rtol=0, msg=lambda m, k=key, n=name: f"{n} {k}: {m}"
            )


def _bias_results(job_dir: Path) -> dict[str, float]:
    return json.loads((job_dir / "bias" / "validate" / "mmbias.json").read_text())["metrics"]


def test_two_ddp_tasks_under_srun_measure_the_same_bias_as_one(run_cli, tmp_path, in_repo):
    cheap = _callbacks_and_loggers(tmp_path, slow_seconds=0.0, wandb=False)
    trained = tmp_path / "trained"
    main(["fit", "--config", str(QUICKSTART), "--config", str(cheap), *SMALL, "--trainer.max_steps", "2",
          "--trainer.logger.init_args.save_dir", str(trained), "--trainer.default_root_dir", str(trained)])  # fmt: skip
    (checkpoint,) = trained.rglob("*.ckpt")
    args = ["--command", "validate", "--config", str(QUICKSTART), "--config", str(cheap), *SMALL]
    args += ["--ckpt_path", str(checkpoint)]
    one = _submit(run_cli, tmp_path / "one", *args)
    two = _submit(
        run_cli,
        tmp_path / "two",
        *args,
        "--trainer.devices",
        "2",
        "--trainer.strategy",
        "ddp",
        "--ntasks_per_node",
        "2",
    )
    for job in (one, two):
        _wait_for(lambda job=job: _finished(job), f"job {job} to end", timeout=300)
    assert [_scontrol(job)["JobState"] for job in (one, two)] == ["COMPLETED", "COMPLETED"]
    assert "--ntasks-per-node=2" in (tmp_path / "two" / "job.sbatch").read_text()
    expected, measured = _bias_results(tmp_path / "one" / f"job-{one}"), _bias_results(tmp_path / "two" / f"job-{two}")
    assert measured.keys() == expected.keys() and expected
    for metric, value in expected.items():
        assert measured[metric] == pytest.approx(value, rel=1e-6, abs=1e-9), metric


def test_a_2x2_sweep_runs_as_one_array_and_status_reports_every_task(run_cli, tmp_path, in_repo):
    cheap = _callbacks_and_loggers(tmp_path, slow_seconds=0.0, wandb=False)
    small = [*SMALL, "--trainer.max_steps", "2", "--trainer.max_epochs", "1", "--data.init_args.n_train", "16"]
    job = _submit(
        run_cli,
        tmp_path / "sweep",
        "--config", str(QUICKSTART), "--config", str(cheap), *small,
        "--grid", "model.init_args.optimizer.init_args.lr=0.001,0.003", "--seeds", "0", "1",
        action="sweep",
    )  # fmt: skip
    _wait_for(lambda: all(task.outcome in ("finished", "failed") for task in run_status(tmp_path / "sweep")), "sweep")
    tasks = run_status(tmp_path / "sweep")
    assert [(task.task, task.job, task.outcome) for task in tasks] == [
        (f"task-{i:03d}", f"{job}_{i}", "finished") for i in range(4)
    ], [task.summary for task in tasks]
    code, out, _ = run_cli(["slurm", "status", str(tmp_path / "sweep")])
    assert (
        code == 0
        and len(out.splitlines()) == 4
        and all(": finished; 1 attempt(s)" in line for line in out.splitlines())
    )
    rates = {
        yaml.safe_load((tmp_path / "sweep" / f"task-{i:03d}" / "config.yaml").read_text())["model"]["init_args"][
            "optimizer"
        ]["init_args"]["lr"]
        for i in range(4)
    }
    assert rates == {0.001, 0.003}

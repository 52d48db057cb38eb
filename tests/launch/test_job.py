"""The per-job runner without Slurm: the job directory, the placed config, the attempt records, the cleanup."""

import json
from pathlib import Path

import yaml

from vlbias.commands.resolve import runnable
from vlbias.launch.job import job_key, placed_in, run, task_dir, wandb_run_id
from vlbias.launch.submit import resolve_task

FIT = runnable("fit")

BORING = Path(__file__).parent / "boring.yaml"


def test_job_and_task_ids_name_the_directories():
    assert job_key({"SLURM_JOB_ID": "12"}) == "12"
    assert job_key({"SLURM_JOB_ID": "13", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "1"}) == "12_1"
    assert task_dir(Path("r"), {"SLURM_ARRAY_TASK_ID": "3"}) == Path("r/task-003")
    assert task_dir(Path("r"), {"SLURM_JOB_ID": "12"}) == Path("r")


def test_a_requeued_fit_resumes_from_its_own_newest_hpc_checkpoint(tmp_path):
    job_dir = tmp_path / "job-12"
    job_dir.mkdir()
    for n in (1, 2, 10):
        (job_dir / f"hpc_ckpt_{n}.ckpt").touch()
    (tmp_path / "job-11").mkdir()
    (tmp_path / "job-11" / "hpc_ckpt_30.ckpt").touch()  # another job's: never used
    config = {"ckpt_path": "start.ckpt", "trainer": {"logger": {"class_path": "vlbias.loggers.CSVLogger"}}}
    placed = placed_in(config, FIT, job_dir)
    assert placed["ckpt_path"] == str(job_dir / "hpc_ckpt_10.ckpt")
    assert placed["trainer"]["default_root_dir"] == str(job_dir)
    assert placed["trainer"]["logger"]["init_args"] == {"save_dir": str(job_dir), "name": "", "version": ""}
    assert placed_in(config, FIT, tmp_path / "job-13")["ckpt_path"] == "start.ckpt"  # a new job starts as asked


def test_the_wandb_logger_of_a_job_gets_an_id_derived_from_the_job(tmp_path):
    wandb = {"class_path": "vlbias.loggers.WandbLogger", "init_args": {"project": "p"}}
    config = {"trainer": {"logger": [{"class_path": "vlbias.loggers.CSVLogger"}, wandb]}}
    first = placed_in(config, FIT, tmp_path / "job-12_3")["trainer"]["logger"][1]["init_args"]
    again = placed_in(config, FIT, tmp_path / "job-12_3")["trainer"]["logger"][1]["init_args"]
    other = placed_in(config, FIT, tmp_path / "elsewhere" / "job-12_3")["trainer"]["logger"][1]["init_args"]
    assert first["id"] == again["id"] == wandb_run_id(tmp_path / "job-12_3") and first["id"].startswith("12_3-")
    assert other["id"] != first["id"]  # the same Slurm id on another run directory: another W&B run
    given = {**wandb, "init_args": {"id": "mine"}}
    assert (
        placed_in({"trainer": {"logger": given}}, FIT, tmp_path / "job-1")["trainer"]["logger"]["init_args"]["id"]
        == "mine"
    )


def test_a_finished_attempt_is_recorded_and_its_hpc_checkpoints_are_removed(tmp_path):
    task = resolve_task(runnable("validate"), ["--config", str(BORING), "--trainer.limit_val_batches", "2"], {})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(task.config))
    job_dir = tmp_path / "job-12"
    job_dir.mkdir()
    (job_dir / "hpc_ckpt_1.ckpt").write_bytes(b"stale")  # not a checkpoint: only removed, never loaded
    status = run(tmp_path, runnable("validate"), {"SLURM_JOB_ID": "12", "SLURM_PROCID": "0"})
    assert status == 0
    events = [json.loads(line) for line in (job_dir / "attempts.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("outcome")) for e in events] == [("start", None), ("end", "finished")]
    assert events[1]["checkpoint"] is None and not list(job_dir.glob("hpc_ckpt_*"))
    assert yaml.safe_load((job_dir / "config.yaml").read_text())["trainer"]["default_root_dir"] == str(job_dir)


def test_a_failed_attempt_is_recorded_with_its_exit_status(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"class_path": "no.such.Model"}}))
    status = run(tmp_path, FIT, {"SLURM_JOB_ID": "5"})
    events = [json.loads(line) for line in (tmp_path / "job-5" / "attempts.jsonl").read_text().splitlines()]
    assert status == 2 and (events[-1]["outcome"], events[-1]["exit_status"]) == ("failed", 2)


def test_an_audit_runs_as_a_job_with_its_outputs_in_the_job_directory(tmp_path):
    argv = ["--model", "clip", "--tiny", "--suites", "[mmbias]", "--out", "ignored", "--seed", "3"]
    task = resolve_task(runnable("audit"), argv, {})
    assert task.config["seed"] == 3 and task.config["suites"] == ["mmbias"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(task.config))
    status = run(tmp_path, runnable("audit"), {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0"})
    job_dir = tmp_path / "job-7"
    assert status == 0
    entries = json.loads((job_dir / "audit" / "audit.json").read_text())["entries"]
    assert [(e["suite"], e["dataset"], e["status"]) for e in entries] == [
        ("mmbias", "biasworld", "measured"),  # no --data_root: nothing else is listed as absent
    ]
    assert (job_dir / "audit" / "report" / "index.html").is_file()
    events = [json.loads(line) for line in (job_dir / "attempts.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("outcome")) for e in events] == [("start", None), ("end", "finished")]


def test_status_names_a_cut_last_record_and_refuses_a_broken_submission_by_name(tmp_path, run_cli, monkeypatch):
    from vlbias.launch import status as status_module
    from vlbias.launch.status import run_status

    monkeypatch.setattr(status_module, "_slurm_state", lambda job: (None, None))  # the job's own records only

    (tmp_path / "submission.json").write_text(json.dumps({"job_id": "7", "tasks": None}))
    job_dir = tmp_path / "job-7"
    job_dir.mkdir()
    start = {"event": "start", "job": "7", "restart": 0, "resume_from": None}
    (job_dir / "attempts.jsonl").write_text(json.dumps(start) + '\n{"event": "end", "outc')  # killed mid-write
    (status,) = run_status(tmp_path)
    assert (status.attempts, status.outcome) == (1, "unreadable")
    code, out, err = run_cli(["slurm", "status", str(tmp_path)])  # said, by file and line, and not exit 0
    assert "job 7: unreadable; 1 attempt(s)" in out and "attempts.jsonl line 2 is cut short" in out, out
    assert code == 2 and "1 task(s) have an unreadable attempts record" in err and "line 2" in err, err
    (job_dir / "attempts.jsonl").write_text('{"event": "st\n' + json.dumps(start) + "\n")
    code, out, err = run_cli(["slurm", "status", str(tmp_path)])
    assert code == 2 and out == "" and "attempts.jsonl line 1 is not a JSON record" in err, err
    (tmp_path / "submission.json").write_text('{"job_id": "7", "ta')
    code, out, err = run_cli(["slurm", "status", str(tmp_path)])
    assert code == 2 and out == "" and "submission.json is not a submission record" in err, err


def test_a_debias_runs_as_a_job_with_its_folder_in_the_job_directory(tmp_path):
    argv = ["--model", "clip", "--tiny", "--method", "orth_proj", "--out", "ignored", "--seed", "3",
            "--biasworld.eval_per_combination", "1", "--suite_options",
            "{mmbias: {statistics: {n_permutations: 100, n_bootstrap: 50}}}"]  # fmt: skip
    task = resolve_task(runnable("debias"), argv, {})
    assert task.config["seed"] == 3 and task.config["method"] == "orth_proj" and task.config["split"] == "val"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(task.config))
    status = run(tmp_path, runnable("debias"), {"SLURM_JOB_ID": "8", "SLURM_PROCID": "0"})
    job_dir = tmp_path / "job-8"
    assert status == 0
    assert json.loads((job_dir / "debias" / "debias.json").read_text())["methods"]["orth_proj"]["state"]
    assert (job_dir / "debias" / "after" / "mmbias.json").is_file()
    events = [json.loads(line) for line in (job_dir / "attempts.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("outcome")) for e in events] == [("start", None), ("end", "finished")]

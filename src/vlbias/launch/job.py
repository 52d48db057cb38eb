"""What runs on the nodes: ``srun python -m vlbias.commands.job RUN_DIR COMMAND``, one process per task, which
hands the command to :func:`run`.

Each job gets its own directory, named from its Slurm ids so that a requeued job finds it again and a new
job never sees another job's files::

    RUN_DIR/[task-NNN/]            config.yaml (written at submission), task.json (a sweep's task)
        job-<JOBID>[_<TASKID>]/    the trainer's default_root_dir and every logger's directory:
                                   config.yaml (as run), hpc_ckpt_N.ckpt, metrics.csv, checkpoints/,
                                   bias/, wandb/, attempts.jsonl

Before it runs ``vlbias COMMAND --config <job dir>/config.yaml`` in this process, it points the trainer and
loggers at the job directory and, when an HPC checkpoint of this job exists (a requeue), sets ``ckpt_path``
to the newest one: explicitly, so the restore does not depend on Lightning detecting Slurm, and it also
wins over a ``ckpt_path`` the run started from. Rank 0 appends one ``start`` and one ``end`` record per
attempt to ``attempts.jsonl``. The end's ``outcome``:

* ``finished``: the command returned; the job's HPC checkpoints are deleted (nothing can resume from them).
* ``requeued``: Lightning saved an HPC checkpoint in this attempt and requeued the job; the SIGTERM that
  follows ends the attempt (or, with W&B, often a ``ConnectionResetError``: Slurm's SIGTERM also reaches
  the W&B service process).
* ``stopped``: stopped by SIGTERM with no new checkpoint (a time limit or preemption without the requeue
  signal, ``scancel``). Lightning ends such a run with exit status 0, so Slurm would call it COMPLETED;
  here the process exits with 143 (128 + SIGTERM) and Slurm records it as FAILED.
* ``failed``: any other error (exit status of the command, or 1).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from vlbias.atomic import atomic_write
from vlbias.errors import ConfigError
from vlbias.launch.job_spec import Runnable

ATTEMPTS_FILE = "attempts.jsonl"
HPC_PATTERN = "hpc_ckpt_*.ckpt"
SIGTERM_EXIT = 143
NAMED_LOGGERS = ("CSVLogger", "TensorBoardLogger")  # log to save_dir/name/version: both set empty
WANDB_LOGGER = "vlbias.loggers.WandbLogger"


def job_key(env: Mapping[str, str]) -> str:
    """``<array job id>_<task id>`` in a job array, else ``<job id>``: the id ``scontrol requeue`` takes."""
    if "SLURM_ARRAY_JOB_ID" in env and "SLURM_ARRAY_TASK_ID" in env:
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    if "SLURM_JOB_ID" not in env:
        raise ConfigError("vlbias.commands.job runs inside a Slurm job, but SLURM_JOB_ID is not set")
    return env["SLURM_JOB_ID"]


def task_dir(run_dir: Path, env: Mapping[str, str]) -> Path:
    """The run's directory, or in a job array (a sweep) its task's ``task-NNN``."""
    if "SLURM_ARRAY_TASK_ID" in env:
        return run_dir / f"task-{int(env['SLURM_ARRAY_TASK_ID']):03d}"
    return run_dir


def hpc_checkpoints(job_dir: Path) -> list[Path]:
    """Lightning's HPC checkpoints in ``job_dir``, oldest first (``hpc_ckpt_N``, by N)."""
    return sorted(job_dir.glob(HPC_PATTERN), key=lambda path: int(path.stem.rsplit("_", 1)[1]))


def placed_in(config: dict[str, Any], command: Runnable, job_dir: Path) -> dict[str, Any]:
    """``config`` with its outputs in ``job_dir``: the trainer's root and every logger's directory for a
    Lightning command (``name`` and ``version`` empty for CSV/TensorBoard, so nothing auto-increments on a
    restart; vlbias's W&B logger also gets the job's run id, :func:`wandb_run_id`), ``out`` for
    ``measure``/``prune``/``audit``/``debias`` the folder ``job_dir/<command>`` (``prune``, ``audit`` and ``debias``
    replace their folder as a unit, which must not take the job's own records with it); for ``fit``, ``ckpt_path``
    is the newest HPC checkpoint."""
    if not command.lightning:
        return {**config, "out": str(job_dir / command.name)}
    trainer = dict(config.get("trainer") or {})
    trainer["default_root_dir"] = str(job_dir)
    logger = trainer.get("logger")
    if isinstance(logger, dict | list):
        entries = [_logger_in(entry, job_dir) for entry in (logger if isinstance(logger, list) else [logger])]
        trainer["logger"] = entries if isinstance(logger, list) else entries[0]
    placed = {**config, "trainer": trainer}
    checkpoints = hpc_checkpoints(job_dir)
    if command.name == "fit" and checkpoints:
        placed["ckpt_path"] = str(checkpoints[-1])
    return placed


def _logger_in(entry: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    init_args = {**(entry.get("init_args") or {}), "save_dir": str(job_dir)}
    if entry.get("class_path", "").rsplit(".", 1)[-1] in NAMED_LOGGERS:
        init_args |= {"name": "", "version": ""}
    if entry.get("class_path") == WANDB_LOGGER and not (init_args.get("id") or init_args.get("version")):
        init_args["id"] = wandb_run_id(job_dir)
    return {**entry, "init_args": init_args}


def wandb_run_id(job_dir: Path) -> str:
    """The W&B run id of a job: its Slurm id (``<job>`` or ``<array job>_<task>``) and 6 hex digits of the
    job directory's path (Slurm ids repeat across clusters), the same on every rank and every requeue."""
    digest = hashlib.sha1(str(job_dir.resolve()).encode()).hexdigest()[:6]
    return f"{job_dir.name.removeprefix('job-')}-{digest}"


def record(job_dir: Path, event: dict[str, Any]) -> None:
    """Append one JSON line to ``<job_dir>/attempts.jsonl`` (flushed and synced: the job may be killed next)."""
    with open(job_dir / ATTEMPTS_FILE, "a") as handle:
        handle.write(json.dumps(event) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def run(run_dir: Path, command: Runnable, env: Mapping[str, str]) -> int:
    """Run one attempt of this task's job; return the exit status (see the module's docstring)."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    here = task_dir(run_dir, env)
    key = job_key(env)
    job_dir = here / f"job-{key}"
    job_dir.mkdir(parents=True, exist_ok=True)
    config = placed_in(yaml.safe_load((here / "config.yaml").read_text()), command, job_dir)
    text = yaml.safe_dump(config, sort_keys=False)
    atomic_write(job_dir / "config.yaml", lambda handle: handle.write(text.encode()))  # same text on every rank
    rank_zero = env.get("SLURM_PROCID", "0") == "0"
    before = {path.name for path in hpc_checkpoints(job_dir)}
    attempt = {"job": key, "restart": int(env.get("SLURM_RESTART_COUNT", "0")), "host": socket.gethostname()}
    if rank_zero:
        resumed = Path(config["ckpt_path"]).name if config.get("ckpt_path") and before else None
        record(job_dir, {"event": "start", "time": _now(), **attempt, "command": command.name, "resume_from": resumed})
    outcome, status, error = "finished", 0, None
    sigterm = _SigtermNotice()
    try:
        command.run(["--config", str(job_dir / "config.yaml")])
    except SIGTERMException:
        outcome, status = "stopped", SIGTERM_EXIT
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        outcome, status = ("finished", 0) if code == 0 else ("failed", code)
    except BaseException as exception:  # recorded, then raised on: the traceback goes to the job's output
        outcome, status, error = "failed", 1, f"{type(exception).__name__}: {exception}"
        raise
    finally:
        sigterm.restore()
        if outcome != "finished" and any(path.name not in before for path in hpc_checkpoints(job_dir)):
            outcome = "requeued"  # Lightning saved and requeued; SIGTERM (or W&B's lost connection) ended it
        elif outcome != "finished" and sigterm.received:
            outcome, status = "stopped", SIGTERM_EXIT  # also when W&B, hit by the same SIGTERM, raised first
        if rank_zero:
            if outcome == "finished":
                for path in hpc_checkpoints(job_dir):
                    path.unlink()
            latest = hpc_checkpoints(job_dir)
            end = {"event": "end", "time": _now(), **attempt, "outcome": outcome, "exit_status": status}
            record(job_dir, end | {"checkpoint": latest[-1].name if latest else None, "error": error})
    return status


class _SigtermNotice:
    """Notes a SIGTERM. Lightning keeps this handler and calls it with its own (it adds the handler it finds);
    before Lightning installs its handlers (or after it restored them) a SIGTERM ends the process at once,
    as with no handler, by ``SystemExit(143)``."""

    def __init__(self) -> None:
        self.received = False
        self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.received = True
        if signal.getsignal(signal.SIGTERM) == self._handle:  # Lightning is not handling SIGTERM now
            raise SystemExit(SIGTERM_EXIT)

    def restore(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

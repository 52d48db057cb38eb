"""``vlbias slurm submit`` and ``vlbias slurm sweep``: resolve, check, write the run directory, ``sbatch``.

A run directory holds ``job.sbatch``, the resolved ``config.yaml`` (a sweep: one ``task-NNN/`` per task,
each with its ``config.yaml`` and ``task.json``) and, once submitted, ``submission.json`` with the job id.
Each job then works in its own ``job-<id>`` folder below it (:mod:`vlbias.launch.job`).
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from vlbias.atomic import atomic_write
from vlbias.errors import ConfigError
from vlbias.launch.continuing_loggers import with_continuing_loggers
from vlbias.launch.job_spec import JobSpec, Runnable, job_for_trainer, single_process_job
from vlbias.launch.render import render_sbatch

SUBMISSION_FILE = "submission.json"
SCRIPT_FILE = "job.sbatch"


@dataclass(frozen=True)
class Task:
    """One configuration to run: the resolved config, the grid values and seed that made it (a sweep)."""

    config: dict[str, Any]
    overrides: dict[str, str]
    notes: list[str]


@dataclass(frozen=True)
class Submission:
    """What was written (and submitted): the script's text, the run directory, the job id (None: dry run), and for
    a sweep each task's grid values and seed, in array-index order."""

    script: str
    run_dir: Path
    job_id: str | None
    notes: list[str]
    tasks: list[dict[str, str]] = field(default_factory=list)


def resolve_task(command: Runnable, argv: list[str], overrides: dict[str, str]) -> Task:
    """The resolved config of ``vlbias <command> <argv> --key value ...`` with continuing loggers."""
    extra = [arg for key, value in overrides.items() for arg in (f"--{key}", value)]
    config = command.resolve([*argv, *extra])
    notes: list[str] = []
    if command.lightning:
        config, notes = with_continuing_loggers(config)
    return Task(config, overrides, notes)


def checked_job(command: Runnable, config: dict[str, Any], job: JobSpec, argv: list[str]) -> JobSpec:
    """``job`` checked against the resolved ``config`` and completed (nodes, tasks, GPUs, name, python)."""
    if command.lightning:
        job = job_for_trainer(config.get("trainer") or {}, job)
    else:
        job = single_process_job(job, command.name)
    configs = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--config"]
    name = job.job_name or (Path(configs[0]).stem if configs else command.name)  # the experiment, before deltas
    return replace(job, job_name=name, python=job.python or sys.executable)


def requeue_signal(config: dict[str, Any]) -> str:
    """The signal name (without ``SIG``) of the config's SLURM environment plugin, ``USR1`` by default (the
    default of ``SLURMEnvironment``, which Lightning also picks on its own inside Slurm)."""
    plugins = (config.get("trainer") or {}).get("plugins") or []
    for plugin in plugins if isinstance(plugins, list) else [plugins]:
        if isinstance(plugin, dict) and str(plugin.get("class_path", "")).endswith("SLURMEnvironment"):
            signal = (plugin.get("init_args") or {}).get("requeue_signal") or "SIGUSR1"
            return str(signal).removeprefix("SIG")
    return "USR1"


def new_run_dir(root: Path, name: str) -> Path:
    """``<root>/<name>-<UTC time>``, made unique with ``-2``, ``-3``, ... when it exists."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    candidate, n = root / f"{name}-{stamp}", 1
    while candidate.exists():
        n += 1
        candidate = root / f"{name}-{stamp}-{n}"
    return candidate


def submit(
    command: Runnable, argv: list[str], job: JobSpec, run_dir: Path | None, root: Path, dry_run: bool = False
) -> Submission:
    """Resolve ``vlbias <command> <argv>``, check it against ``job``, write the run directory and submit."""
    task = resolve_task(command, argv, {})
    job = checked_job(command, task.config, job, argv)
    run_dir = (run_dir or new_run_dir(root, job.job_name)).absolute()
    script = render_sbatch(job, run_dir, command.name, job.python, requeue_signal=requeue_signal(task.config))
    if dry_run:
        return Submission(script, run_dir, None, task.notes)
    _prepare(run_dir)
    _write_yaml(run_dir / "config.yaml", task.config)
    return _submit(run_dir, script, command.name, n_tasks=None, notes=task.notes)


def parse_grid(entries: list[str]) -> dict[str, list[str]]:
    """``["key=v1,v2", ...]`` as ``{key: [v1, v2]}`` (values stay text: the command's parser reads them)."""
    grid: dict[str, list[str]] = {}
    for entry in entries:
        key, sep, values = entry.partition("=")
        if not sep or not key or not values or key in grid:
            raise ConfigError(f"Expected --grid KEY=V1,V2,... with a new KEY each time but got {entry!r}")
        grid[key.removeprefix("--")] = values.split(",")
    return grid


def sweep(
    command: Runnable,
    argv: list[str],
    grid: dict[str, list[str]],
    seeds: list[int],
    job: JobSpec,
    run_dir: Path | None,
    root: Path,
    dry_run: bool = False,
) -> Submission:
    """One job array over every combination of the ``grid`` values and ``seeds``; task ``i`` runs in
    ``task-NNN`` with its own resolved config. Each task is checked against ``job`` before anything runs."""
    seed_key = "seed"  # every command's one seed name
    keys = list(grid) + ([seed_key] if seeds else [])
    combos = list(itertools.product(*grid.values(), *([[str(s) for s in seeds]] if seeds else [])))
    if not combos or not keys:
        raise ConfigError("Expected at least one --grid KEY=V1,... or --seeds for a sweep")
    tasks = [resolve_task(command, argv, dict(zip(keys, combo))) for combo in combos]
    checked = [checked_job(command, task.config, job, argv) for task in tasks]
    if len({(j.nodes, j.ntasks_per_node, j.gpus_per_node) for j in checked}) > 1:
        raise ConfigError(
            "The sweep's tasks need different resources (nodes, tasks or GPUs); one array cannot run them"
        )
    job = checked[0]
    run_dir = (run_dir or new_run_dir(root, f"{job.job_name}-sweep")).absolute()
    script = render_sbatch(job, run_dir, command.name, job.python, len(tasks), requeue_signal(tasks[0].config))
    notes = sorted({note for task in tasks for note in task.notes})
    if dry_run:
        return Submission(script, run_dir, None, notes, [task.overrides for task in tasks])
    _prepare(run_dir)
    for index, task in enumerate(tasks):
        folder = run_dir / f"task-{index:03d}"
        folder.mkdir()
        _write_yaml(folder / "config.yaml", task.config)
        description = json.dumps({"task": index, "overrides": task.overrides}, indent=1)
        atomic_write(folder / "task.json", lambda handle, text=description: handle.write(text.encode()))
    return _submit(run_dir, script, command.name, n_tasks=len(tasks), notes=notes)


def sbatch(script: Path) -> str:
    """Submit ``script`` with ``sbatch --parsable``; the job id."""
    if shutil.which("sbatch") is None:
        raise ConfigError(f"sbatch is not on PATH; the job script is written to {script} (submit it on the cluster)")
    done = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ConfigError(f"sbatch refused {script}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]  # "<id>[;<cluster>]"


def _prepare(run_dir: Path) -> None:
    if run_dir.exists() and any(run_dir.iterdir()):
        raise ConfigError(f"Run directory {run_dir} exists and is not empty; give a new --run_dir")
    run_dir.mkdir(parents=True, exist_ok=True)


def _write_yaml(path: Path, config: dict[str, Any]) -> None:
    text = yaml.safe_dump(config, sort_keys=False)
    atomic_write(path, lambda handle: handle.write(text.encode()))


def _submit(run_dir: Path, script: str, command: str, n_tasks: int | None, notes: list[str]) -> Submission:
    path = run_dir / SCRIPT_FILE
    atomic_write(path, lambda handle: handle.write(script.encode()))
    job_id = sbatch(path)
    record = {"command": command, "job_id": job_id, "tasks": n_tasks, "script": SCRIPT_FILE}
    text = json.dumps(record | {"submitted": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1)
    atomic_write(run_dir / SUBMISSION_FILE, lambda handle: handle.write(text.encode()))
    return Submission(script, run_dir, job_id, notes)

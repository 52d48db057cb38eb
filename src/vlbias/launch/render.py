"""The sbatch script of a run or sweep, from the template ``vlbias/launch/job.sbatch``.

Every value is shell-quoted (``shlex.quote``); the run's configuration never appears in the script: the job
reads it from ``config.yaml`` in the run directory. Only the job's ``setup`` lines are shell code, the
user's own, written as given.
"""

from __future__ import annotations

import shlex
from importlib.resources import files
from pathlib import Path
from string import Template

from vlbias.launch.job_spec import JobSpec

TEMPLATE = files("vlbias.launch") / "job.sbatch"


def sbatch_lines(job: JobSpec, run_dir: Path, n_tasks: int | None, requeue_signal: str) -> list[str]:
    """The ``#SBATCH`` lines: resources, the requeue signal, requeue, appended output and, for a sweep of
    ``n_tasks`` tasks, the job array."""
    options: list[tuple[str, object]] = [
        ("job-name", job.job_name),
        ("nodes", job.nodes),
        ("ntasks-per-node", job.ntasks_per_node),
        ("gpus-per-node", job.gpus_per_node or None),
        ("cpus-per-task", job.cpus_per_task),
        ("mem", job.mem),
        ("time", job.time),
        ("partition", job.partition),
        ("account", job.account),
        ("signal", f"{requeue_signal}@{job.signal_seconds}"),
    ]
    output = run_dir / ("slurm-%A_%a.out" if n_tasks is not None else "slurm-%j.out")
    options.append(("output", output))
    if n_tasks is not None:
        options.append(("array", f"0-{n_tasks - 1}" + (f"%{job.max_parallel}" if job.max_parallel else "")))
    lines = [f"#SBATCH --{name}={shlex.quote(str(value))}" for name, value in options if value is not None]
    return [*lines, "#SBATCH --requeue", "#SBATCH --open-mode=append", *job.extra_sbatch]


def render_sbatch(
    job: JobSpec, run_dir: Path, command: str, python: str, n_tasks: int | None = None, requeue_signal: str = "USR1"
) -> str:
    """The sbatch script that runs ``vlbias <command>`` on the run (or, with ``n_tasks``, the sweep) in
    ``run_dir`` through ``python -m vlbias.commands.job`` (:func:`vlbias.launch.job.run`)."""
    launch = [python, "-m", "vlbias.commands.job", str(run_dir), command]
    kind = f"a sweep of {n_tasks} tasks" if n_tasks is not None else "one run"
    return Template(TEMPLATE.read_text()).substitute(
        description=f"vlbias {command}, {kind}: {shlex.quote(str(run_dir))}".replace("\n", " "),
        sbatch_lines="\n".join(sbatch_lines(job, run_dir, n_tasks, requeue_signal)),
        setup_lines="".join(f"{line}\n" for line in job.setup),
        launch=shlex.join(launch),
    )

"""``vlbias slurm status RUN_DIR``: per task, what Slurm says (while it still knows the job: ``scontrol show
job``, as there is no accounting database to ask) and what the job's own records say (``attempts.jsonl``,
written by :mod:`vlbias.launch.job`): attempts, requeues, and how the last attempt ended."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vlbias.errors import InputError
from vlbias.launch.job import ATTEMPTS_FILE
from vlbias.launch.submit import SUBMISSION_FILE


@dataclass(frozen=True)
class TaskStatus:
    """One task of a run: its folder, Slurm job id, Slurm's state and restart count (None once Slurm has
    forgotten the job), the attempts started, how many of them were restarts (requeues) and how many of
    those resumed from an HPC checkpoint, and the last attempt's outcome (``finished``, ``requeued``,
    ``stopped``, ``failed``; ``running`` when it has not ended; ``unreadable`` when the records' last line is cut
    short; None: never ran), and ``broken``, the cut line named by file and number ("" when every line reads)."""

    task: str
    job: str
    slurm_state: str | None
    restarts: int | None
    attempts: int
    requeues: int
    resumed: int
    outcome: str | None
    broken: str = ""

    @property
    def summary(self) -> str:
        slurm = f"{self.slurm_state}, Restarts={self.restarts}" if self.slurm_state else "gone from Slurm"
        outcome = {None: "never started", "stopped": "stopped by SIGTERM without a checkpoint: NOT finished"}.get(
            self.outcome, self.outcome
        )
        note = f"; UNREADABLE: {self.broken}" if self.broken else ""
        return (
            f"{self.task}: job {self.job}: {outcome}; {self.attempts} attempt(s), requeued {self.requeues} time(s), "
            f"resumed from a checkpoint {self.resumed} time(s) [slurm: {slurm}]{note}"
        )


def run_status(run_dir: Path) -> list[TaskStatus]:
    """The status of every task of the run or sweep in ``run_dir``."""
    path = run_dir / SUBMISSION_FILE
    if not path.is_file():
        raise InputError(f"{path} not found: {run_dir} is not a run directory submitted by `vlbias slurm`")
    try:
        submission = json.loads(path.read_text())
        job_id, n_tasks = submission["job_id"], submission["tasks"]
    except (json.JSONDecodeError, TypeError, KeyError) as err:
        raise InputError(
            f"{path} is not a submission record ({type(err).__name__}: {err}); expected the JSON `vlbias slurm` "
            "writes, with job_id and tasks"
        ) from None
    if n_tasks is None:
        return [_task_status(run_dir, ".", job_id)]
    return [_task_status(run_dir / f"task-{i:03d}", f"task-{i:03d}", f"{job_id}_{i}") for i in range(n_tasks)]


def _task_status(folder: Path, name: str, job: str) -> TaskStatus:
    events, broken = _events(folder / f"job-{job}" / ATTEMPTS_FILE)
    starts = [event for event in events if event["event"] == "start"]
    ends = [event for event in events if event["event"] == "end"]
    if not starts:
        outcome = None
    elif len(ends) < len(starts):
        outcome = "running"
    else:
        outcome = ends[-1]["outcome"]
    if broken:
        outcome = "unreadable"
    state, restarts = _slurm_state(job)
    resumed = sum(event.get("resume_from") is not None for event in starts)
    return TaskStatus(name, job, state, restarts, len(starts), max(len(starts) - 1, 0), resumed, outcome, broken)


def _events(path: Path) -> tuple[list[dict], str]:
    """The job's records, one JSON line each, and what is wrong with its last line: one cut short (the job was
    killed while writing it, or the file was truncated) is left out of the records and named by file and number,
    so the status says it cannot tell how the last attempt ended; an unreadable line before it is refused by
    number."""
    if not path.is_file():
        return [], ""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]  # bad bytes: a bad line
    events = []
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                return events, f"{path} line {number} is cut short ({line[:80]!r}): the last record is missing"
            raise InputError(f"{path} line {number} is not a JSON record: {line[:80]!r}") from None
        if not isinstance(event, dict) or "event" not in event:
            raise InputError(f"{path} line {number} is not an attempt record: {line[:80]!r}")
        events.append(event)
    return events, ""


#: Seconds ``scontrol`` may take: a controller that is down makes it retry for about 18 s before it gives up.
SCONTROL_TIMEOUT = 5


def _slurm_state(job: str) -> tuple[str | None, int | None]:
    """``JobState`` and ``Restarts`` from ``scontrol show job -o``; (None, None) when Slurm does not know it or
    does not answer within :data:`SCONTROL_TIMEOUT` (the job's own records still give its outcome)."""
    if shutil.which("scontrol") is None:
        return None, None
    try:
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", job],
            capture_output=True,
            text=True,
            check=False,
            timeout=SCONTROL_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return None, None
    if done.returncode != 0 or not done.stdout.strip():
        return None, None
    fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
    return fields.get("JobState"), int(fields["Restarts"]) if "Restarts" in fields else None

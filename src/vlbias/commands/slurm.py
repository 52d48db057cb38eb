"""``vlbias slurm submit|sweep|status``: runs and sweeps as Slurm jobs (:mod:`vlbias.launch`).

The job's own options are the fields of :class:`~vlbias.launch.job_spec.JobSpec` (``--nodes``, ``--time``, ...;
``--job_config FILE`` holds any of them as YAML) and of :class:`Submit` / :class:`Sweep`; each is declared once,
with its docstring line as help. Every other argument (``--config``, ``--trainer.max_epochs 3``, ...) belongs to
the command the job runs, which resolves it as ``vlbias <command>`` would, before anything is submitted. A list
option takes several values (``--seeds 0 1 2``) or is repeated (``--setup 'module load cuda' --setup ...``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_origin

from jsonargparse import ActionConfigFile, ArgumentParser

from vlbias.commands import slurm_commands
from vlbias.commands.parsing import bare_flags, new_parser, parse
from vlbias.errors import ConfigError, InputError
from vlbias.launch.job_spec import JobSpec
from vlbias.options import Seed

#: The commands a Slurm job can run (the command table's, vlbias.commands.COMMANDS).
SlurmCommand = Literal[slurm_commands()]  # type: ignore[valid-type]


@dataclass(frozen=True, kw_only=True)
class Submit:
    """What a job runs and where its run directory goes.

    Args:
        command: The vlbias command the job runs; the arguments this command does not know are that command's.
        run_dir: The run directory (default: <root>/<name>-<time>).
        root: Where new run directories go.
        dry_run: Check everything and print the sbatch script (and a sweep's tasks); submit nothing.
    """

    command: SlurmCommand = "fit"
    run_dir: str | None = None
    root: str = "runs/slurm"
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class Sweep(Submit):
    """A job array over a grid of config values and seeds, one task per combination.

    Args:
        grid: KEY=V1,V2,... over a config key of the command (e.g. data.init_args.bias_strength=0.5,0.9); repeatable.
        seeds: Seeds (the command's `seed`): every grid point runs once per seed.
    """

    grid: list[str] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)


def parser(action: Literal["submit", "sweep"]) -> ArgumentParser:
    """The options of ``vlbias slurm submit`` (``sweep``): :class:`JobSpec` and :class:`Submit` (:class:`Sweep`)."""
    options = Sweep if action == "sweep" else Submit
    command = new_parser(
        f"vlbias slurm {action}",
        options.__doc__.splitlines()[0] if action == "sweep" else "Submit one vlbias run as a Slurm job.",
        "Every other argument goes to `vlbias COMMAND` (--config FILE, --trainer.max_epochs 3, ...).",
    )
    command.add_argument("--job_config", action=ActionConfigFile, help="YAML with any of the job options below.")
    command.add_class_arguments(JobSpec, as_group=True)
    command.add_class_arguments(options, as_group=False)
    bare_flags(command)
    return command


def status_parser() -> ArgumentParser:
    command = new_parser("vlbias slurm status", "Finished, failed and requeued tasks of a run or sweep.")
    command.add_argument("run_dir", type=str, help="The run or sweep directory.")
    return command


def split_arguments(command: ArgumentParser, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` cut into the arguments of ``command`` and the rest (the run's command's). A list option gathers the
    values after it, and each repetition adds to it; ``--job_config`` is read before the other options, wherever
    it stands."""
    own, rest = [], []
    options = command._option_string_actions
    tokens = list(argv)
    while tokens:
        token = tokens.pop(0)
        name, sep, value = token.partition("=")
        action = options.get(name)
        if action is None:
            rest.append(token)
            continue
        flag = action.option_strings[0]
        values = [value] if sep else []
        many = get_origin(getattr(action, "_typehint", None)) is list
        while not sep and tokens and not tokens[0].startswith("--") and (many or not values):
            values.append(tokens.pop(0))
        if action.nargs == "?" and values and values[0] not in ("true", "false"):  # a bare flag: the rest is not ours
            rest.extend(values)
            values = []
        if many:
            own += [arg for item in values for arg in (f"{flag}+", item)]
        elif isinstance(action, ActionConfigFile):  # read first: the command line adds to its lists and wins
            own = [flag, *values, *own]
        else:
            own += [flag, *values]
    return own, rest


def main(argv: Sequence[str]) -> None:
    action, *rest = argv or ["--help"]
    if action == "status":
        from vlbias.launch.status import run_status

        tasks = run_status(Path(parse(status_parser(), rest)["run_dir"]))
        for task in tasks:
            print(task.summary)
        broken = [task.broken for task in tasks if task.broken]
        if broken:  # a status read from part of the records: said, and the exit status is not 0
            raise InputError(f"{len(broken)} task(s) have an unreadable attempts record: {broken[0]}")
        return
    if action not in ("submit", "sweep"):
        names = "submit, sweep, status"
        if action in ("-h", "--help"):
            print(
                f"usage: vlbias slurm {{{names}}} ...\n\nSubmit vlbias runs and sweeps to Slurm; report their status."
            )
            return
        raise ConfigError(f"vlbias slurm: expected an action among {names} but got {action!r}.")
    command = parser(action)
    own, passed = split_arguments(command, rest)
    if "-h" in passed or "--help" in passed:
        own.append("--help")
    values = parse(command, own)
    job = JobSpec(**{spec.name: values.pop(spec.name) for spec in dataclasses.fields(JobSpec)})
    _submit(action, job, values, passed)


def _submit(action: str, job: JobSpec, values: dict, passed: list[str]) -> None:
    from vlbias.commands.resolve import runnable
    from vlbias.launch.submit import parse_grid, submit, sweep

    where = {
        "job": job,
        "run_dir": None if values["run_dir"] is None else Path(values["run_dir"]),
        "root": Path(values["root"]),
        "dry_run": values["dry_run"],
    }
    if action == "submit":
        submission = submit(runnable(values["command"]), passed, **where)
    else:
        grid = parse_grid(values["grid"])
        submission = sweep(runnable(values["command"]), passed, grid, list(values["seeds"]), **where)
    for note in submission.notes:
        print(f"note: {note}")
    if submission.job_id is None:
        for index, overrides in enumerate(submission.tasks):
            print(f"task-{index:03d}: " + " ".join(f"{key}={value}" for key, value in overrides.items()))
        print(submission.script, end="")
        return
    print(f"wrote {submission.run_dir}")
    print(submission.job_id)

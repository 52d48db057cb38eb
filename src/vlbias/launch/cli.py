"""``vlbias slurm submit|sweep|status``.

The job's own options (``--nodes``, ``--time``, ...; or ``--job_config FILE`` with the same keys) are read
here; every other argument (``--config``, ``--trainer.max_epochs 3``, ...) belongs to the command that runs,
which resolves it as ``vlbias <command>`` would, before anything is submitted.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from vlbias.errors import ConfigError
from vlbias.launch.job_spec import JobSpec
from vlbias.launch.resolve import COMMANDS
from vlbias.launch.status import run_status
from vlbias.launch.submit import Submission, parse_grid, submit, sweep

_JOB_HELP = {field.name: field.name.replace("_", " ") for field in fields(JobSpec)}
_LIST_OPTIONS = ("extra_sbatch", "setup")


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="vlbias slurm", description="Submit vlbias runs and sweeps to Slurm; report their status."
    )
    actions = parser.add_subparsers(dest="action", required=True)
    for action, help_ in (("submit", "one run"), ("sweep", "a grid of configs x seeds as one job array")):
        sub = actions.add_parser(
            action, help=help_, allow_abbrev=False, epilog="Other arguments go to `vlbias COMMAND` (--config ...)."
        )
        _job_arguments(sub)
        if action == "sweep":
            sub.add_argument("--grid", action="append", default=[], help="KEY=V1,V2,... (a config key); repeatable.")
            sub.add_argument("--seeds", type=int, nargs="+", default=[], help="Seeds (seed_everything / --seed).")
    status = actions.add_parser("status", help="finished, failed, requeued tasks of a run or sweep")
    status.add_argument("run_dir", type=Path, help="The run or sweep directory.")
    args, rest = parser.parse_known_args(list(argv))
    if args.action == "status":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        for task in run_status(args.run_dir):
            print(task.summary)
        return
    job = _job_spec(args)
    common = dict(job=job, run_dir=args.run_dir, root=args.root, dry_run=args.dry_run)
    if args.action == "submit":
        _report(submit(args.command, rest, **common))
    else:
        _report(sweep(args.command, rest, parse_grid(args.grid), args.seeds, **common))


def _job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--command", choices=COMMANDS, default="fit", help="The vlbias command to run.")
    parser.add_argument("--run_dir", type=Path, default=None, help="Run directory (default: ROOT/NAME-TIME).")
    parser.add_argument("--root", type=Path, default=Path("runs/slurm"), help="Where new run directories go.")
    parser.add_argument("--dry_run", action="store_true", help="Check and print the sbatch script; submit nothing.")
    parser.add_argument("--job_config", type=Path, default=None, help="YAML with job options (the keys below).")
    for field in fields(JobSpec):
        if field.name in _LIST_OPTIONS:
            parser.add_argument(f"--{field.name}", action="append", default=None, help=f"{_JOB_HELP[field.name]}")
        else:
            kind = int if field.name in ("nodes", "ntasks_per_node", "gpus_per_node", "cpus_per_task") else str
            kind = int if field.name in ("signal_seconds", "max_parallel") else kind
            parser.add_argument(f"--{field.name}", type=kind, default=None, help=_JOB_HELP[field.name])


def _job_spec(args: argparse.Namespace) -> JobSpec:
    """The job file's options, overridden by those on the command line (list options are appended)."""
    values: dict[str, Any] = {}
    if args.job_config is not None:
        loaded = yaml.safe_load(args.job_config.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"Expected {args.job_config} to hold a mapping of job options but got {loaded!r}")
        values = dict(loaded)
        JobSpec.from_mapping(values, str(args.job_config))  # unknown keys named with the file
    for field in fields(JobSpec):
        given = getattr(args, field.name)
        if given is None:
            continue
        values[field.name] = [*values.get(field.name, []), *given] if field.name in _LIST_OPTIONS else given
    return JobSpec.from_mapping(values, "the command line")


def _report(submission: Submission) -> None:
    for note in submission.notes:
        print(f"note: {note}")
    if submission.job_id is None:
        print(submission.script, end="")
        return
    print(f"wrote {submission.run_dir}")
    print(submission.job_id)

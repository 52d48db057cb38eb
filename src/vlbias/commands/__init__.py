"""The ``vlbias`` subcommands: one module each, holding its parser (built from the dataclass or function it calls,
so every option is declared once, with its docstring line as help) and its ``main(argv)``. :data:`COMMANDS` names
them, and is the one list of commands: the console script, LightningCLI's subcommands (:func:`run_as`
``"lightning"``) and the commands a Slurm job runs (:func:`slurm_commands`) are read from it. A command's module
is imported only when it runs, so ``vlbias --help`` imports no torch. :func:`run` is the
one way a command ends: bad input is one ``vlbias: error: ...`` line and exit status 2, whichever command refused
it (the console script and a Slurm job both run commands through it).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from vlbias.errors import VlbiasError
from vlbias.runtime.torch_pair import torchvision_mismatch

#: How a Slurm job runs a command: LightningCLI (one process per device) or one process.
JobKind = Literal["lightning", "one_process"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its line of help, ``"module:function"`` (the function called with the arguments after the
    subcommand's name) and how a Slurm job runs it (``None``: no job runs it)."""

    help: str
    target: str
    job: JobKind | None = None

    def run(self, argv: Sequence[str]) -> None:
        module, _, function = self.target.partition(":")
        handler: Callable[[Sequence[str]], None] = getattr(importlib.import_module(module), function)
        handler(argv)


COMMANDS: dict[str, Command] = {
    "fit": Command(
        "LightningCLI: train from YAML configs (--config FILE ...)", "vlbias.commands.lightning:fit", "lightning"
    ),
    "validate": Command(
        "LightningCLI: evaluate a checkpoint (--ckpt_path); bias callbacks measure it",
        "vlbias.commands.lightning:validate",
        "lightning",
    ),
    "test": Command("LightningCLI: test a checkpoint on the test split", "vlbias.commands.lightning:test", "lightning"),
    "predict": Command("LightningCLI: predict with a checkpoint", "vlbias.commands.lightning:predict", "lightning"),
    "measure": Command(
        "run one bias suite on one model and write results", "vlbias.commands.measure:main", "one_process"
    ),
    "models": Command("list the model adapters and their capabilities", "vlbias.commands.models:main"),
    "prune": Command(
        "remove the embedding dimensions that carry bias (MMBias Algorithm 1) and write a pruned model",
        "vlbias.commands.prune:main",
        "one_process",
    ),
    "debias": Command(
        "fit post-hoc debiasers on a model, measure bias and accuracy before and after, and compare methods",
        "vlbias.commands.debias:main",
        "one_process",
    ),
    "report": Command(
        "write an HTML + Markdown report with figures from results files and logs", "vlbias.commands.report:main"
    ),
    "audit": Command(
        "run every suite a model allows on every data set found, then write the report",
        "vlbias.commands.audit:main",
        "one_process",
    ),
    "slurm": Command(
        "submit runs and sweeps to Slurm (requeue-safe) and report their status", "vlbias.commands.slurm:main"
    ),
}


def run_as(job: JobKind) -> tuple[str, ...]:
    """The commands a Slurm job runs as ``job``, in the table's order."""
    return tuple(name for name, command in COMMANDS.items() if command.job == job)


def slurm_commands() -> tuple[str, ...]:
    """The commands a Slurm job can run: LightningCLI's, then the one-process ones."""
    return run_as("lightning") + run_as("one_process")


def run(name: str, argv: Sequence[str]) -> None:
    """Run command ``name`` on ``argv``; a :class:`VlbiasError` (or an unreadable or unwritable file) ends it with
    one line on stderr and exit status 2, Ctrl-C with status 130."""
    try:
        COMMANDS[name].run(argv)
    except KeyboardInterrupt:  # Ctrl-C: results are written atomically, so the old ones stand
        print("vlbias: interrupted; results already written are intact.", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # output piped into a reader that stopped early (e.g. `| head`)
        sys.stderr.close()
        sys.exit(0)
    except OSError as err:
        if err.filename is None:
            raise
        print(f"vlbias: error: cannot write or read {str(err.filename)!r}: {err.strerror}.", file=sys.stderr)
        sys.exit(2)
    except Exception as err:
        cause = _vlbias_cause(err) or torchvision_mismatch(err)
        if cause is None:
            raise
        print(f"vlbias: error: {cause}", file=sys.stderr)
        sys.exit(2)


def _vlbias_cause(error: BaseException) -> VlbiasError | None:
    """The :class:`VlbiasError` behind ``error``, if any: jsonargparse wraps exceptions raised
    while it instantiates classes from a config (e.g. a ``ConfigError`` from a datamodule)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, VlbiasError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None

"""A command as a Slurm job runs it (:func:`runnable`), and its configuration resolved as the ``vlbias`` command
would see it, without running anything (:func:`resolve_config`).

Lightning commands are parsed by a LightningCLI that stops before it instantiates any class (no model is
built, no weights are read); the one-process commands (``measure``, ``prune``, ``audit``, ``debias``) by their own
parsers, and their options object is made (so its cross-field rules run too). The result is the mapping
LightningCLI itself would save as ``config.yaml``: every default filled in, ``seed: true`` replaced by the drawn
seed. :mod:`vlbias.launch` receives these as a :class:`~vlbias.launch.job_spec.Runnable` and imports no command.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import partial
from typing import Any

import yaml

from vlbias.commands import COMMANDS, run, slurm_commands
from vlbias.commands.lightning_cli import VlbiasCLI, make_cli
from vlbias.commands.parsing import instantiated, parse_namespace
from vlbias.errors import ConfigError
from vlbias.launch.job_spec import Runnable


class _Resolved(Exception):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__("resolved")
        self.config = config


class _ResolveOnlyCLI(VlbiasCLI):
    """A LightningCLI that parses and stops: its resolved config leaves as a :class:`_Resolved`."""

    def before_instantiate_classes(self) -> None:
        text = self._parser(self.subcommand).dump(self.config[self.subcommand], skip_none=False)
        raise _Resolved(yaml.safe_load(text))


def runnable(command: str) -> Runnable:
    """``vlbias <command>`` as a Slurm job runs it; a command no job runs is refused with those that can."""
    if command not in slurm_commands():
        raise ConfigError(f"Expected a command among {list(slurm_commands())} but got {command!r}")
    return Runnable(
        command, COMMANDS[command].job == "lightning", partial(resolve_config, command), partial(run, command)
    )


def resolve_config(command: str, argv: Sequence[str]) -> dict[str, Any]:
    """The resolved configuration of ``vlbias <command> <argv>`` (``--config`` files and ``--key value``
    overrides). Bad options are refused as the command itself refuses them (one :class:`ConfigError` line)."""
    job = COMMANDS[command].job if command in COMMANDS else None
    if job == "lightning":
        try:
            make_cli([command, *argv], cli_class=_ResolveOnlyCLI)
        except _Resolved as resolved:
            return resolved.config
        raise AssertionError("LightningCLI returned without resolving")  # before_instantiate_classes always raises
    if job == "one_process":
        module = importlib.import_module(f"vlbias.commands.{command}")
        parser = module.parser()
        namespace = parse_namespace(parser, argv)
        module.OPTIONS(**instantiated(parser, namespace))  # the options' own cross-field checks
        return yaml.safe_load(parser.dump(namespace, skip_none=False))
    raise ConfigError(f"Expected a command among {list(slurm_commands())} but got {command!r}")

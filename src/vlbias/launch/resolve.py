"""Resolve a run's configuration as the ``vlbias`` command would see it, without running anything, and make
its loggers continue across requeues.

Lightning commands are parsed by a LightningCLI that stops before it instantiates any class (no model is
built, no weights are read); ``measure``, ``prune``, ``audit`` and ``debias`` by their own parsers, and their options object is
made (so its cross-field rules run too). The result is the mapping LightningCLI itself would save as
``config.yaml``: every default filled in, ``seed: true`` replaced by the drawn seed.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, get_args

import yaml

from vlbias.commands.parsing import instantiated, parse_namespace
from vlbias.errors import ConfigError
from vlbias.launch.job_spec import Runnable
from vlbias.lightning_cli import SUBCOMMANDS as LIGHTNING_COMMANDS
from vlbias.lightning_cli import VlbiasCLI, make_cli
from vlbias.run_options import AuditOptions, DebiasOptions, MeasureOptions, PruneOptions

ONE_PROCESS_OPTIONS = {
    "measure": MeasureOptions,
    "prune": PruneOptions,
    "audit": AuditOptions,
    "debias": DebiasOptions,
}
COMMANDS = get_args(Runnable)  # LIGHTNING_COMMANDS and ONE_PROCESS_OPTIONS

# Lightning's loggers -> the ones that continue after a requeue (vlbias.loggers); TensorBoard appends already.
CONTINUING_LOGGERS = {
    "lightning.pytorch.loggers.CSVLogger": "vlbias.loggers.CSVLogger",
    "lightning.pytorch.loggers.csv_logs.CSVLogger": "vlbias.loggers.CSVLogger",
    "lightning.pytorch.loggers.WandbLogger": "vlbias.loggers.WandbLogger",
    "lightning.pytorch.loggers.wandb.WandbLogger": "vlbias.loggers.WandbLogger",
}
KEPT_LOGGERS = (
    "vlbias.loggers.CSVLogger",
    "vlbias.loggers.WandbLogger",
    "lightning.pytorch.loggers.TensorBoardLogger",
    "lightning.pytorch.loggers.tensorboard.TensorBoardLogger",
)


class _Resolved(Exception):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__("resolved")
        self.config = config


class _ResolveOnlyCLI(VlbiasCLI):
    """A LightningCLI that parses and stops: its resolved config leaves as a :class:`_Resolved`."""

    def before_instantiate_classes(self) -> None:
        text = self._parser(self.subcommand).dump(self.config[self.subcommand], skip_none=False)
        raise _Resolved(yaml.safe_load(text))


def resolve_config(command: str, argv: Sequence[str]) -> dict[str, Any]:
    """The resolved configuration of ``vlbias <command> <argv>`` (``--config`` files and ``--key value``
    overrides). Bad options are refused as the command itself refuses them (one :class:`ConfigError` line)."""
    if command in LIGHTNING_COMMANDS:
        try:
            make_cli([command, *argv], cli_class=_ResolveOnlyCLI)
        except _Resolved as resolved:
            return resolved.config
        raise AssertionError("LightningCLI returned without resolving")  # before_instantiate_classes always raises
    if command in ONE_PROCESS_OPTIONS:
        parser = importlib.import_module(f"vlbias.commands.{command}").parser()
        namespace = parse_namespace(parser, argv)
        ONE_PROCESS_OPTIONS[command](**instantiated(parser, namespace))  # the options' own cross-field checks
        return yaml.safe_load(parser.dump(namespace, skip_none=False))
    raise ConfigError(f"Expected a command among {list(COMMANDS)} but got {command!r}")


def with_continuing_loggers(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``config`` with each of Lightning's CSV and W&B loggers replaced by its continuing twin in
    :mod:`vlbias.loggers`, and Lightning's default logger (``logger: true``) by the continuing CSV logger;
    also a line per replacement, for the user. A logger that cannot continue raises :class:`ConfigError`."""
    trainer = config.get("trainer") or {}
    logger = trainer.get("logger")
    if logger is False:
        return config, []
    if logger is None or logger is True:
        entries = [{"class_path": "vlbias.loggers.CSVLogger", "init_args": {}}]
        notes = ["trainer.logger: Lightning's default -> vlbias.loggers.CSVLogger (continues after a requeue)"]
    else:
        entries, notes = [], []
        for index, entry in enumerate(logger if isinstance(logger, list) else [logger]):
            class_path = entry.get("class_path") if isinstance(entry, dict) else None
            if class_path in CONTINUING_LOGGERS:
                notes.append(
                    f"trainer.logger: {class_path} -> {CONTINUING_LOGGERS[class_path]} (continues after a requeue)"
                )
                entry = {**entry, "class_path": CONTINUING_LOGGERS[class_path]}
            elif class_path not in KEPT_LOGGERS:
                raise ConfigError(
                    f"trainer.logger[{index}] is {class_path or entry!r}, which a requeued job cannot continue; "
                    f"use one of {sorted(set(CONTINUING_LOGGERS.values()) | set(KEPT_LOGGERS))}"
                )
            entries.append(entry)
    return {**config, "trainer": {**trainer, "logger": entries if len(entries) > 1 else entries[0]}}, notes

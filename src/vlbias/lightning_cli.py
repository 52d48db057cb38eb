"""The LightningCLI behind ``vlbias fit|validate|test|predict``: Lightning's, plus the continuation of a W&B run.

When the trainer logs with :class:`vlbias.loggers.WandbLogger`, every checkpoint carries the W&B run id
(:class:`~vlbias.loggers.KeepWandbRunId` is added to the callbacks), and ``vlbias fit --ckpt_path CKPT`` gives
the id stored in ``CKPT`` to that logger unless the config names an ``id``: a killed fit restarted from its
checkpoint continues the same W&B run, a new fit starts a new one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.cli import LightningCLI

from vlbias.loggers import KeepWandbRunId, WandbLogger, run_id_in_checkpoint

WANDB_LOGGER = f"{WandbLogger.__module__}.{WandbLogger.__qualname__}"


class VlbiasCLI(LightningCLI):
    """:class:`~lightning.pytorch.cli.LightningCLI` that continues the W&B run of the checkpoint a fit resumes."""

    def before_instantiate_classes(self) -> None:
        if self.subcommand != "fit":
            return
        config = self.config[self.subcommand]
        checkpoint = config.get("ckpt_path")
        if not isinstance(checkpoint, str) or not Path(checkpoint).is_file():
            return  # none, or Lightning's "last"/"hpc": a new W&B run
        run_id = run_id_in_checkpoint(checkpoint)
        if run_id is None:
            return
        for entry in _logger_entries(config.get("trainer.logger")):
            if entry.get("class_path") == WANDB_LOGGER:
                init_args = entry.get("init_args")
                if not (init_args.get("id") or init_args.get("version")):
                    init_args["id"] = run_id

    def after_instantiate_classes(self) -> None:
        trainer = getattr(self, "trainer", None)
        if trainer is not None and any(isinstance(logger, WandbLogger) for logger in trainer.loggers):
            trainer.callbacks.append(KeepWandbRunId())


def _logger_entries(logger: Any) -> list[Any]:
    """The class_path/init_args entries of ``trainer.logger`` (one, a list, or a bool: none)."""
    if isinstance(logger, list):
        return [entry for entry in logger if hasattr(entry, "get") and entry.get("class_path")]
    return [logger] if hasattr(logger, "get") and logger.get("class_path") else []

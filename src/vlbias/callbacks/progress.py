"""What a fit says while it runs: where it writes, at its start and its end, and — when its output is not a
terminal (a log file, a Slurm job), where no progress bar is seen — one line per epoch with the losses and
metrics logged in it. ``vlbias fit`` adds :class:`RunProgress` to every run."""

from __future__ import annotations

import sys
from numbers import Number

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info
from typing_extensions import override

from vlbias.callbacks.bias_suite import run_dir


class RunProgress(Callback):
    """Rank 0 prints ``vlbias: writing <run dir>`` when a fit starts and ``vlbias: wrote <run dir>`` when it ends;
    with ``epoch_lines`` (default: when stdout is not a terminal) also ``epoch N: key=value, ...`` after every
    epoch, from the trainer's logged metrics (the bias callback prints its own lines)."""

    def __init__(self, epoch_lines: bool | None = None) -> None:
        self.epoch_lines = not sys.stdout.isatty() if epoch_lines is None else epoch_lines

    @override
    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            rank_zero_info(f"vlbias: writing {run_dir(trainer)}")

    @override
    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not self.epoch_lines or trainer.fast_dev_run:
            return
        shown = {
            key: float(value)
            for key, value in sorted(trainer.callback_metrics.items())
            if not key.startswith("bias/") and isinstance(value.item() if hasattr(value, "item") else value, Number)
        }
        if shown:
            rank_zero_info(f"epoch {trainer.current_epoch}: " + ", ".join(f"{k}={v:.4g}" for k, v in shown.items()))

    @override
    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        rank_zero_info(f"vlbias: wrote {run_dir(trainer)}")

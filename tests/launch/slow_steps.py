"""A callback for the Slurm tests, imported by the job on the node: each training batch takes at least
``seconds`` (so a signal lands mid-epoch), and ``<default_root_dir>/training.started`` appears at the first
batch (signal only after it: a requeue signal before Lightning's handler is installed kills the process)."""

import time
from pathlib import Path

from lightning.pytorch import Callback


class SlowSteps(Callback):
    def __init__(self, seconds: float = 0.5) -> None:
        self.seconds = seconds

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        Path(trainer.default_root_dir, "training.started").touch()
        time.sleep(self.seconds)

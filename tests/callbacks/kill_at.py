"""A callback for the kill-and-restart test, imported by the fit it kills: SIGKILL at the end of training step
``step`` (before that step's checkpoint: Lightning runs checkpoint callbacks last), as ``kill -9`` or an OOM
killer would."""

import os
import signal

from lightning.pytorch import Callback


class KillAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)

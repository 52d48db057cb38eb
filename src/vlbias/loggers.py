"""Loggers that continue across restarts of the same run (a killed fit restarted from its checkpoint, a
requeued Slurm job), instead of overwriting or splitting it.

* :class:`CSVLogger` appends to an existing ``metrics.csv``: Lightning's deletes it when the log directory
  already holds files (``_ExperimentWriter._check_log_dir_exists``), so after a requeue only the steps of
  the last attempt remained (``../shared/notes/local-slurm.md``).
* :class:`WandbLogger` fixes its W&B run id when it is made, :class:`KeepWandbRunId` stores that id in every
  checkpoint the trainer saves, and ``vlbias fit --ckpt_path CKPT`` gives the id stored in ``CKPT`` back to the
  logger (:func:`run_id_in_checkpoint`), which calls ``wandb.init(id=..., resume="allow")``
  (https://docs.wandb.ai/guides/runs/resuming/): the restarted fit continues the W&B run of the checkpoint it
  resumes, and a new fit starts a new one. Under ``vlbias slurm`` the id derives from the job id.

Both are drop-in subclasses of Lightning's loggers; ``vlbias slurm submit`` puts them in place of
Lightning's and points them at the job's own directory.
"""

from __future__ import annotations

import csv
import io
import os
import pickle
import secrets
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger
from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.utilities import rank_zero_only

from vlbias.atomic import atomic_write

RUN_ID_KEY = "vlbias_wandb_run_id"  # the checkpoint's entry holding the W&B run id


class _AppendingExperimentWriter(ExperimentWriter):
    """Lightning's CSV writer, except that an existing ``metrics.csv`` is continued. The first rows this
    process saves replace the earlier rows from their first step on: those were logged after the checkpoint
    the run resumed from (training went on until SIGTERM), and are logged again now, so every step is in
    the file once."""

    def __init__(self, log_dir: str) -> None:
        super().__init__(log_dir)
        self._continued = False

    def _check_log_dir_exists(self) -> None:  # Lightning's deletes metrics.csv here
        return

    def save(self) -> None:
        if not self.metrics:
            return
        if not self._continued and os.path.isfile(self.metrics_file_path):
            first_step = min(row["step"] for row in self.metrics)
            with open(self.metrics_file_path, newline="") as handle:
                reader = csv.DictReader(handle)
                header = list(reader.fieldnames or [])
                kept = [row for row in reader if float(row["step"]) < first_step]
            text = io.StringIO()
            writer = csv.DictWriter(text, fieldnames=header)
            writer.writeheader()
            writer.writerows(kept)
            atomic_write(self.metrics_file_path, lambda out: out.write(text.getvalue().encode()))
            self.metrics_keys = sorted(set(self.metrics_keys) | set(header))
        self._continued = True
        super().save()


class CSVLogger(LightningCSVLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.CSVLogger` that continues ``<log_dir>/metrics.csv``
    when it exists instead of deleting it. Give it a fixed ``version`` (``vlbias slurm`` uses the job's own
    directory) so that a restart finds the same file; with ``version=None`` every run gets a new
    ``version_N`` as in Lightning. Arguments are Lightning's."""

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingExperimentWriter(log_dir=self.log_dir)
        return self._experiment


class WandbLogger(LightningWandbLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.WandbLogger` whose W&B run id is fixed when it is made, so
    that it can be stored in checkpoints (:class:`KeepWandbRunId`) and continued: the ``id`` (or ``version``)
    given, else a new random one (rank 0; the other ranks log nothing). ``wandb.init`` gets ``resume="allow"``.
    Offline by default, unless ``WANDB_MODE`` is set, which then decides (``offline``, ``disabled``,
    ``online``); Lightning's ``offline=True`` would override the variable.

    A restart in offline mode writes a new ``wandb/offline-run-*`` folder with the same run id;
    ``wandb sync`` uploads them into one run. Other arguments are Lightning's.
    """

    def __init__(
        self, *args: Any, id: str | None = None, version: str | None = None, offline: bool = True, **kwargs: Any
    ) -> None:
        # id and version are declared here with their type: left to **kwargs, jsonargparse reads an all-digit
        # id from a config as an int, which wandb refuses
        run_id = id or version or _new_run_id()
        offline = offline and "WANDB_MODE" not in os.environ
        kwargs["resume"] = kwargs.get("resume") or "allow"  # LightningCLI passes resume=None explicitly
        super().__init__(*args, offline=offline, id=run_id, **kwargs)


def _new_run_id() -> str | None:
    """8 characters of [0-9a-f], like W&B's own ids, on rank 0; None elsewhere (only rank 0 makes the run)."""
    return secrets.token_hex(4) if rank_zero_only.rank == 0 else None


class KeepWandbRunId(Callback):
    """Stores the run id of the trainer's :class:`WandbLogger` in every checkpoint it saves (``RUN_ID_KEY``),
    HPC checkpoints included. ``vlbias fit`` adds it whenever that logger is configured; a Python user of the
    Trainer adds it to ``callbacks``."""

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger) and logger.version:
                checkpoint[RUN_ID_KEY] = logger.version
                return


def run_id_in_checkpoint(path: str | Path) -> str | None:
    """The W&B run id :class:`KeepWandbRunId` stored in the checkpoint at ``path``; None when it holds none
    or is not a readable checkpoint (resuming from it then fails with Lightning's own message). Memory-mapped:
    the weights are not read."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile):  # not one
        return None
    run_id = checkpoint.get(RUN_ID_KEY) if isinstance(checkpoint, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None

"""Loggers that continue across restarts of the same run (a requeued Slurm job), instead of overwriting or
splitting it.

* :class:`CSVLogger` appends to an existing ``metrics.csv``: Lightning's deletes it when the log directory
  already holds files (``_ExperimentWriter._check_log_dir_exists``), so after a requeue only the steps of
  the last attempt remained (``../shared/notes/local-slurm.md``).
* :class:`WandbLogger` keeps one W&B run id per log directory, in ``<save_dir>/wandb_run_id``, and passes it
  back to ``wandb.init(id=..., resume="allow")`` on a restart (https://docs.wandb.ai/guides/runs/resuming/).

Both are drop-in subclasses of Lightning's loggers; ``vlbias slurm submit`` puts them in place of
Lightning's and points them at the job's own directory.
"""

from __future__ import annotations

import csv
import io
import os
import secrets
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger
from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.utilities import rank_zero_only

from vlbias.atomic import atomic_write

RUN_ID_FILE = "wandb_run_id"


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
    """Lightning's :class:`~lightning.pytorch.loggers.WandbLogger` that continues one W&B run per log
    directory: without an explicit ``id`` (or ``version``) it reads ``<save_dir>/wandb_run_id``, or on the
    first start generates an id and writes it there (rank 0), and ``wandb.init`` gets ``id=<it>,
    resume="allow"``. Offline by default, unless ``WANDB_MODE`` is set, which then decides (``offline``,
    ``disabled``, ``online``); Lightning's ``offline=True`` would override the variable.

    A restart in offline mode writes a new ``wandb/offline-run-*`` folder with the same run id;
    ``wandb sync`` uploads them into one run. Other arguments are Lightning's.
    """

    def __init__(self, *args: Any, save_dir: str = ".", offline: bool = True, **kwargs: Any) -> None:
        run_id = kwargs.pop("id", None) or kwargs.pop("version", None) or self._stored_or_new_id(Path(save_dir))
        offline = offline and "WANDB_MODE" not in os.environ
        kwargs["resume"] = kwargs.get("resume") or "allow"  # LightningCLI passes resume=None explicitly
        super().__init__(*args, save_dir=save_dir, offline=offline, id=run_id, **kwargs)

    @staticmethod
    def _stored_or_new_id(save_dir: Path) -> str | None:
        """The id in ``<save_dir>/wandb_run_id``; else, on rank 0, a new one written there; else None."""
        path = save_dir / RUN_ID_FILE
        if path.is_file():
            return path.read_text().strip()
        if rank_zero_only.rank != 0:
            return None  # only rank 0 creates the W&B run
        run_id = secrets.token_hex(4)  # 8 characters of [0-9a-f], like W&B's own ids
        save_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda out: out.write(f"{run_id}\n".encode()))
        return run_id

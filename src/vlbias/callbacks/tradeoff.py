"""Log bias next to accuracy, epoch by epoch: ``<log_dir>/tradeoff.csv`` for any logger, tables and charts
for Weights & Biases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.trainer.states import TrainerFn
from typing_extensions import override

from vlbias.atomic import atomic_write
from vlbias.callbacks.bias_suite import BiasSuiteCallback, run_dir
from vlbias.errors import ConfigError
from vlbias.results import INTERVAL_SUFFIXES, logged_bias_keys, read_items


def measured_bias(trainer: Trainer) -> dict[str, float]:
    """The bias metrics (``bias/<suite>/<metric>`` with ``/ci_low``, ``/ci_high``, ``/p_value``) that the
    trainer's :class:`BiasSuiteCallback` instances measured in the current epoch; empty when none ran."""
    measured = {}
    for callback in trainer.callbacks:
        if isinstance(callback, BiasSuiteCallback) and callback.history:
            last = callback.history[-1]
            if last["epoch"] == trainer.current_epoch and last["stage"] == "fit":
                measured |= {key: value for key, value in last.items() if key.startswith("bias/")}
    return measured


def _float(value: Any) -> float:
    return float(value.item() if hasattr(value, "item") else value)


class TradeoffCallback(Callback):
    """After each validation epoch of ``fit`` in which a :class:`BiasSuiteCallback` measured, put every bias
    metric beside the accuracy metric(s) ``accuracy`` (keys the module logs, e.g. ``val/activity_accuracy``).

    Written on rank 0, atomically: ``<log_dir>/tradeoff.csv``, one row per measured epoch: ``epoch``,
    ``step``, the accuracy metrics, and each bias metric with ``/ci_low``, ``/ci_high``, ``/p_value``.
    ``vlbias report`` reads it. Nothing is recomputed: bias values come from the suites' callback, accuracy
    from ``trainer.callback_metrics``.

    With a :class:`~lightning.pytorch.loggers.WandbLogger` it also logs (W&B is never required; offline
    unless ``WANDB_MODE`` says otherwise):

    * ``tradeoff/table``: the rows above as a ``wandb.Table``;
    * ``tradeoff/<bias>/epochs``: a line chart of the bias metric and its interval over epochs;
    * ``tradeoff/<bias>/vs/<accuracy>``: a bias-against-accuracy scatter over epochs;
    * ``bias/<suite>/items``: the per-item results of each suite run as a ``wandb.Table`` (read from the
      results files the suites' callback wrote).

    A fit restarted from its checkpoint continues the same W&B run with :class:`vlbias.loggers.WandbLogger`
    (the run id travels in the checkpoint).

    The rows are kept in checkpoints under :attr:`state_key`, so a resumed fit keeps the earlier epochs.

    Args:
        accuracy: the accuracy metric key(s).
        bias: the bias metric keys to keep (default every one measured).
    """

    def __init__(self, accuracy: str | list[str], bias: list[str] | None = None) -> None:
        self.accuracy = [accuracy] if isinstance(accuracy, str) else list(accuracy)
        if not self.accuracy or not all(isinstance(key, str) and key for key in self.accuracy):
            raise ConfigError(f"Expected `accuracy` to be a metric key or a list of them but got {accuracy!r}")
        self.bias = bias
        self.rows: list[dict[str, float]] = []

    @property
    def state_key(self) -> str:
        return self._generate_state_key(accuracy=self.accuracy, bias=self.bias)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"rows": self.rows}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.rows = list(state_dict["rows"])

    @override
    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking or trainer.fast_dev_run or trainer.state.fn != TrainerFn.FITTING:
            return
        bias = measured_bias(trainer)
        if not bias:
            return
        row = {"epoch": trainer.current_epoch, "step": trainer.global_step} | self._accuracy(trainer)
        row |= {key: value for key, value in bias.items() if self._keep(key)}
        self.rows = [r for r in self.rows if r["epoch"] != row["epoch"]] + [row]
        log_dir = run_dir(trainer)  # on every rank, as the results folders below: broadcasts under DDP
        item_files = [
            out_dir / f"{spec.key}.json"
            for callback in trainer.callbacks
            if isinstance(callback, BiasSuiteCallback)
            for out_dir in callback.results_dirs(trainer, stage=None)[:1]  # this epoch's folder
            for spec in callback.specs
        ]
        if not trainer.is_global_zero:
            return
        table = pd.DataFrame(self.rows)
        atomic_write(log_dir / "tradeoff.csv", lambda handle: handle.write(table.to_csv(index=False).encode()))
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                self._log_wandb(trainer, logger, table, item_files)

    def _accuracy(self, trainer: Trainer) -> dict[str, float]:
        missing = [key for key in self.accuracy if key not in trainer.callback_metrics]
        if missing:
            raise ConfigError(
                f"TradeoffCallback: accuracy metric(s) {missing} were not logged; logged metrics are "
                f"{sorted(trainer.callback_metrics)}"
            )
        return {key: _float(trainer.callback_metrics[key]) for key in self.accuracy}

    def _keep(self, key: str) -> bool:
        if self.bias is None:
            return True
        return any(key == name or key.startswith(name) and key[len(name) :] in INTERVAL_SUFFIXES for name in self.bias)

    def _log_wandb(self, trainer: Trainer, logger: WandbLogger, table: pd.DataFrame, item_files: list[Path]) -> None:
        import wandb

        logged: dict[str, Any] = {"tradeoff/table": wandb.Table(dataframe=table)}
        for key in logged_bias_keys(table.columns):
            series = [key, *(key + s for s in INTERVAL_SUFFIXES[:2] if key + s in table.columns)]
            logged[f"tradeoff/{key}/epochs"] = wandb.plot.line_series(
                xs=table["epoch"].tolist(),
                ys=[table[s].tolist() for s in series],
                keys=series,
                title=key,
                xname="epoch",
            )
            for accuracy in self.accuracy:
                pairs = wandb.Table(dataframe=table[["epoch", accuracy, key]])
                logged[f"tradeoff/{key}/vs/{accuracy}"] = wandb.plot.scatter(
                    pairs, accuracy, key, title=f"{key} vs {accuracy}"
                )
        for path in item_files:  # <name>.json of each suite the bias callbacks ran this epoch
            logged[f"bias/{path.stem}/items"] = wandb.Table(dataframe=read_items(path).astype(str))
        logger.experiment.log(logged | {"trainer/global_step": trainer.global_step})

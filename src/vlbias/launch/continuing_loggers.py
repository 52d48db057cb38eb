"""The loggers of a Lightning run submitted to Slurm, made to continue across requeues
(:func:`with_continuing_loggers`): each of Lightning's CSV and W&B loggers replaced by its twin in
:mod:`vlbias.loggers`, which appends to the same ``metrics.csv`` and resumes the same W&B run."""

from __future__ import annotations

from typing import Any

from vlbias.errors import ConfigError

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

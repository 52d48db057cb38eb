"""The continuing loggers: metrics.csv survives a restart with every step once; one W&B id per directory."""

import pandas as pd

from vlbias.loggers import RUN_ID_FILE, CSVLogger, WandbLogger


def _log(save_dir, steps, loss):
    logger = CSVLogger(save_dir, name="", version="")
    logger.log_hyperparams({"lr": 0.1})
    logger.save()  # Lightning saves right after the hyperparameters, before any metric
    for step in steps:
        logger.log_metrics({"train/loss": loss + step}, step=step)
    logger.finalize("success")
    return logger


def test_a_restart_continues_metrics_csv_and_replaces_the_steps_after_its_checkpoint(tmp_path):
    _log(tmp_path, range(0, 5), loss=10.0)  # the first attempt logged steps 0-4, its checkpoint was at step 3
    logger = _log(tmp_path, range(3, 7), loss=20.0)  # the restart redoes steps 3-6
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert metrics["step"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert metrics["train/loss"].tolist() == [10.0, 11.0, 12.0, 23.0, 24.0, 25.0, 26.0]
    assert logger.log_dir.rstrip("/") == str(tmp_path)


def test_a_new_column_after_a_restart_keeps_the_earlier_rows(tmp_path):
    _log(tmp_path, range(0, 2), loss=0.0)
    logger = CSVLogger(tmp_path, name="", version="")
    logger.log_metrics({"val/loss": 5.0}, step=2)
    logger.finalize("success")
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert metrics["step"].tolist() == [0, 1, 2]
    assert metrics["val/loss"].isna().tolist() == [True, True, False]


def test_the_wandb_run_id_is_kept_in_the_save_dir_and_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    first = WandbLogger(save_dir=str(tmp_path), project="p")
    run_id = (tmp_path / RUN_ID_FILE).read_text().strip()
    again = WandbLogger(save_dir=str(tmp_path), project="p")
    assert first._wandb_init["id"] == again._wandb_init["id"] == run_id and len(run_id) == 8
    assert again._wandb_init["resume"] == "allow"
    assert WandbLogger(save_dir=str(tmp_path / "other"), project="p")._wandb_init["id"] != run_id
    assert WandbLogger(save_dir=str(tmp_path), id="given")._wandb_init["id"] == "given"


def test_wandb_mode_decides_over_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert WandbLogger(save_dir=str(tmp_path), offline=True)._offline is True
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert WandbLogger(save_dir=str(tmp_path), offline=True)._offline is False

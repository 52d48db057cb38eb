"""The continuing loggers: metrics.csv survives a restart with every step once; the W&B run id is fixed when the
logger is made and travels in the checkpoints."""

import pandas as pd
import torch

from vlbias.loggers import RUN_ID_KEY, CSVLogger, KeepWandbRunId, WandbLogger, run_id_in_checkpoint


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


def test_the_wandb_run_id_is_fixed_when_the_logger_is_made_and_a_given_one_wins(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    first, second = WandbLogger(save_dir=str(tmp_path), project="p"), WandbLogger(save_dir=str(tmp_path), project="p")
    assert first.version != second.version  # two runs in one directory are two W&B runs
    assert len(first.version) == 8 and int(first.version, 16) >= 0
    assert first._wandb_init["id"] == first.version and first._wandb_init["resume"] == "allow"
    assert WandbLogger(save_dir=str(tmp_path), id="given")._wandb_init["id"] == "given"
    assert WandbLogger(save_dir=str(tmp_path), version="v1").version == "v1"


def test_the_run_id_is_stored_in_the_checkpoint_and_read_back_without_the_weights(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)

    class Trainer:  # the one attribute the callback reads
        loggers = [CSVLogger(str(tmp_path)), WandbLogger(save_dir=str(tmp_path), id="abc123")]

    checkpoint = {"state_dict": {"w": torch.zeros(3)}}
    KeepWandbRunId().on_save_checkpoint(Trainer(), None, checkpoint)
    assert checkpoint[RUN_ID_KEY] == "abc123"
    torch.save(checkpoint, tmp_path / "with.ckpt")
    torch.save({"state_dict": {}}, tmp_path / "without.ckpt")
    (tmp_path / "broken.ckpt").write_bytes(b"not a checkpoint")
    assert run_id_in_checkpoint(tmp_path / "with.ckpt") == "abc123"
    assert run_id_in_checkpoint(tmp_path / "without.ckpt") is None
    assert run_id_in_checkpoint(tmp_path / "broken.ckpt") is None  # resuming from it fails in Lightning, by name


def test_wandb_mode_decides_over_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert WandbLogger(save_dir=str(tmp_path), offline=True)._offline is True
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert WandbLogger(save_dir=str(tmp_path), offline=True)._offline is False


def test_an_all_digit_run_id_stays_a_string_through_the_config_parser():
    from pathlib import Path

    from vlbias.commands.resolve import resolve_config

    root = Path(__file__).resolve().parents[2]
    argv = [
        "--config",
        str(root / "configs/experiment/quickstart.yaml"),
        "--config",
        str(root / "configs/logger/wandb.yaml"),
    ]
    config = resolve_config("fit", [*argv, "--trainer.logger.init_args.id", "25602898"])
    assert config["trainer"]["logger"]["init_args"]["id"] == "25602898"

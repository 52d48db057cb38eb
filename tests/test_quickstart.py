"""The quickstart experiment, shrunk: trains, logs the effect size every epoch, writes results."""

import logging
from pathlib import Path

import pandas as pd
import pytest

from vlbias.cli import main
from vlbias.models.registry import load
from vlbias.results import read_results

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_logs_and_writes_the_effect_size_every_epoch(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    main(
        [
            "fit",
            "--config", str(ROOT / "configs/experiment/quickstart.yaml"),
            "--trainer.max_epochs", "2",
            "--trainer.logger.init_args.save_dir", str(tmp_path),
            "--trainer.enable_progress_bar", "false",
            "--trainer.log_every_n_steps", "1",
            "--data.init_args.n_train", "64",
            "--data.init_args.eval_per_combination", "2",
            "--data.init_args.batch_size", "32",
        ]
    )  # fmt: skip
    run = tmp_path / "quickstart" / "version_0"
    key = "bias/mmbias/man_vs_woman/stereotyped_activities/effect_size"
    metrics = pd.read_csv(run / "metrics.csv")
    assert metrics[key].notna().sum() == 2  # one value per validation epoch
    for epoch in (0, 1):
        results = read_results(run / "bias" / f"epoch={epoch:03d}" / "mmbias.json")
        assert results.config["trainer_epoch"] == epoch
    latest = read_results(run / "bias" / "mmbias.json")
    assert latest.metrics["man_vs_woman/stereotyped_activities/effect_size"] == pytest.approx(
        metrics[key].dropna().iloc[-1], rel=1e-6
    )
    assert any(record.getMessage().startswith("epoch 1: " + key) for record in caplog.records)
    # the exported model loads through the real loading path
    adapter = load("clip", checkpoint=str(run / "model"), device="cpu")
    assert adapter.name == "clip"


def test_quickstart_logs_to_offline_wandb_without_an_account(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    main(
        [
            "fit",
            "--config", str(ROOT / "configs/experiment/quickstart.yaml"),
            "--config", str(ROOT / "configs/logger/wandb.yaml"),
            "--trainer.max_epochs", "1",
            "--trainer.logger.init_args.save_dir", str(tmp_path),
            "--trainer.enable_progress_bar", "false",
            "--trainer.log_every_n_steps", "1",
            "--trainer.enable_checkpointing", "false",
            "--data.init_args.n_train", "16",
            "--data.init_args.eval_per_combination", "1",
        ]
    )  # fmt: skip
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    history = next(run.glob("run-*.wandb"))
    assert history.stat().st_size > 0

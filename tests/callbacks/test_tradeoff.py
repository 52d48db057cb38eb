"""TradeoffCallback (tradeoff.csv, W&B tables and charts offline) and BiasAwareCheckpoint
(best accuracy within a bias bound; Pareto-optimal epochs), on a shrunk quickstart."""

import json
from pathlib import Path

import pandas as pd
import pytest

from vlbias.callbacks import BiasAwareCheckpoint, TradeoffCallback
from vlbias.cli import main
from vlbias.errors import ConfigError
from vlbias.report import pareto_front

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"
KEY = "bias/mmbias/man_vs_woman/stereotyped_activities/effect_size"
ACCURACY = "val/i2t_accuracy"
TINY_FIT = [
    "--trainer.enable_progress_bar", "false",
    "--trainer.log_every_n_steps", "1",
    "--data.init_args.n_train", "64",
    "--data.init_args.eval_per_combination", "2",
    "--data.init_args.batch_size", "32",
]  # fmt: skip


def callbacks(tmp_path: Path, checkpoints: bool = True) -> str:
    """``--trainer.callbacks``: the quickstart's suite, the trade-off log and (``checkpoints``) two
    bias-aware checkpoints: a bound that admits every epoch, the Pareto front, a bound that admits none."""
    suite = {"suite": "mmbias", "options": {"statistics": {"n_permutations": 200, "n_bootstrap": 50}}}
    checkpoint = {"accuracy": ACCURACY, "bias": KEY, "filename": "{epoch}"}
    logging = [
        {"class_path": "vlbias.callbacks.BiasSuiteCallback", "init_args": {"suites": [suite]}},
        {"class_path": "vlbias.callbacks.TradeoffCallback", "init_args": {"accuracy": ACCURACY}},
    ]
    selection = [
        {
            "class_path": "vlbias.callbacks.BiasAwareCheckpoint",
            "init_args": checkpoint | {"bound": 10.0, "dirpath": str(tmp_path / "bound")},
        },
        {
            "class_path": "vlbias.callbacks.BiasAwareCheckpoint",
            "init_args": checkpoint | {"pareto": True, "dirpath": str(tmp_path / "pareto")},
        },
        {
            "class_path": "vlbias.callbacks.BiasAwareCheckpoint",
            "init_args": checkpoint | {"bound": 0.0, "dirpath": str(tmp_path / "none")},
        },
    ]
    return json.dumps(logging + selection if checkpoints else logging)


def test_tradeoff_csv_and_bias_aware_checkpoints(tmp_path):
    main(
        ["fit", "--config", str(QUICKSTART), "--trainer.max_epochs", "3", "--trainer.logger.init_args.save_dir",
         str(tmp_path), "--trainer.callbacks", callbacks(tmp_path), *TINY_FIT]
    )  # fmt: skip
    run = tmp_path / "quickstart" / "version_0"
    table = pd.read_csv(run / "tradeoff.csv")
    assert table["epoch"].tolist() == [0, 1, 2]
    assert {ACCURACY, KEY, f"{KEY}/ci_low", f"{KEY}/ci_high", f"{KEY}/p_value", "step"} <= set(table.columns)
    metrics = pd.read_csv(run / "metrics.csv")  # the CSV logger holds the same numbers under the same keys
    for key in (KEY, ACCURACY):
        assert metrics[key].dropna().tolist() == pytest.approx(table[key].tolist(), rel=1e-6)
    assert not (tmp_path / "none").exists() or not any((tmp_path / "none").iterdir())  # bound 0 admits none
    # bound 10 admits every epoch: the best is the most accurate (the first of equals, as ModelCheckpoint)
    best = int(table[ACCURACY].idxmax())
    assert sorted(p.name for p in (tmp_path / "bound").iterdir()) == [f"epoch={best}.ckpt"]
    front = pareto_front(table[KEY].tolist(), table[ACCURACY].tolist())
    kept = sorted(p.name for p in (tmp_path / "pareto").iterdir())
    assert kept == sorted(f"epoch={e}.ckpt" for e, on in zip(table["epoch"], front, strict=True) if on)


def test_offline_wandb_gets_tables_and_charts(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    main(
        ["fit", "--config", str(QUICKSTART), "--config", str(ROOT / "configs/logger/wandb.yaml"),
         "--trainer.max_epochs", "2", "--trainer.logger.init_args.save_dir", str(tmp_path),
         "--trainer.enable_checkpointing", "false", "--trainer.callbacks", callbacks(tmp_path, checkpoints=False), *TINY_FIT]
    )  # fmt: skip
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    tables = run / "files" / "media" / "table"
    tradeoff = sorted((tables / "tradeoff").glob("table_*.table.json"), key=lambda p: p.stat().st_mtime)[-1]
    content = json.loads(tradeoff.read_text())
    assert {"epoch", ACCURACY, KEY} <= set(content["columns"]) and len(content["data"]) == 2
    items = next((tables / "bias" / "mmbias").glob("items_*.table.json"))
    assert "effect_size" in json.loads(items.read_text())["columns"]
    charts = {p.name for p in (run / "files" / "media" / "graph").rglob("*")} | {
        p.relative_to(tables).as_posix() for p in tables.rglob("*.table.json")
    }
    assert any("vs" in name for name in charts) and any("epochs" in name for name in charts), charts


def test_bad_options_are_one_clear_error():
    with pytest.raises(ConfigError, match="`accuracy`"):
        TradeoffCallback(accuracy=[])
    with pytest.raises(ConfigError, match="one of `bound` and `pareto=True`"):
        BiasAwareCheckpoint(accuracy=ACCURACY, bias=KEY)
    with pytest.raises(ConfigError, match="non-negative"):
        BiasAwareCheckpoint(accuracy=ACCURACY, bias=KEY, bound=-1.0)


def test_biasworld_mlm_logs_the_same_keys_to_wandb_and_csv(tmp_path, monkeypatch):
    """A masked-LM run (configs/experiment/biasworld_mlm.yaml) with CounterBias every epoch, logged to W&B (offline)
    and CSV at once: the W&B trade-off table, its charts and the per-item table are there, and the CSV side
    (tradeoff.csv, metrics.csv) holds the same keys and numbers."""
    import wandb

    wandb.finish()  # a run an earlier test left open in this process
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    accuracy, key = "val/mlm_accuracy", "bias/counterbias/activity/B@V-L/avg"
    suite = {
        "suite": "counterbias",
        "options": {"statistics": {"n_permutations": 200, "n_bootstrap": 50}, "attack": {"steps": 2}},
    }
    callbacks = [
        {"class_path": "vlbias.callbacks.BiasSuiteCallback", "init_args": {"suites": [suite]}},
        {"class_path": "vlbias.callbacks.TradeoffCallback", "init_args": {"accuracy": accuracy}},
    ]
    loggers = [
        {"class_path": "vlbias.loggers.CSVLogger", "init_args": {"save_dir": str(tmp_path), "name": "csv"}},
        {"class_path": "vlbias.loggers.WandbLogger", "init_args": {"save_dir": str(tmp_path), "project": "t"}},
    ]
    main(
        ["fit", "--config", str(ROOT / "configs/experiment/biasworld_mlm.yaml"), "--trainer.max_epochs", "2",
         "--trainer.logger", json.dumps(loggers), "--trainer.callbacks", json.dumps(callbacks),
         "--trainer.enable_checkpointing", "false", *TINY_FIT]
    )  # fmt: skip
    wandb.finish()
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    tables = run / "files" / "media" / "table"
    tradeoff = sorted((tables / "tradeoff").glob("table_*.table.json"), key=lambda p: p.stat().st_mtime)[-1]
    content = json.loads(tradeoff.read_text())
    csv_table = pd.read_csv(tmp_path / "csv" / "version_0" / "tradeoff.csv")
    assert content["columns"] == list(csv_table.columns) and {"epoch", accuracy, key} <= set(csv_table.columns)
    assert pd.DataFrame(content["data"], columns=content["columns"])[key].tolist() == pytest.approx(
        csv_table[key].tolist(), rel=1e-6
    )
    assert len(csv_table) == 2
    metrics = pd.read_csv(tmp_path / "csv" / "version_0" / "metrics.csv")
    assert metrics[key].dropna().tolist() == pytest.approx(csv_table[key].tolist(), rel=1e-6)
    assert any((tables / "bias" / "counterbias").glob("items_*.table.json"))
    charts = {p.relative_to(tables).as_posix() for p in tables.rglob("*.table.json")}
    assert any(key.split("/", 1)[1] in name and "epochs" in name for name in charts), charts

"""A fit killed with SIGKILL and restarted from its last checkpoint continues the same W&B run (offline): the
run id travels in the checkpoint (vlbias.loggers.KeepWandbRunId, added by `vlbias fit`)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import wandb

from vlbias.cli import main
from vlbias.loggers import RUN_ID_KEY

ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    "--config", str(ROOT / "configs/experiment/quickstart.yaml"),
    "--config", str(ROOT / "configs/logger/wandb.yaml"),
    "--trainer.max_epochs", "2", "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
    "--data.init_args.n_train", "48", "--data.init_args.batch_size", "8", "--data.init_args.eval_per_combination", "1",
]  # fmt: skip


def _callbacks(tmp_path: Path, kill_at: int | None) -> str:
    checkpoint = {
        "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
        "init_args": {"dirpath": str(tmp_path / "ckpt"), "every_n_train_steps": 2, "save_last": True},
    }
    kill = [{"class_path": "tests.callbacks.kill_at.KillAt", "init_args": {"step": kill_at}}] if kill_at else []
    return json.dumps([checkpoint, *kill])


def _run_ids(wandb_dir: Path) -> list[str]:
    return sorted(re.sub(r"^offline-run-\d{8}_\d{6}-", "", p.name) for p in wandb_dir.glob("offline-run-*"))


@pytest.mark.slow  # two fits in new Pythons, one killed: ~18 s on 2 cores
def test_a_killed_fit_restarted_from_its_checkpoint_continues_the_same_wandb_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    argv = ["fit", *SMALL, "--trainer.logger.init_args.save_dir", str(tmp_path)]
    wandb.finish()  # a run an earlier test left open in this process
    # the killed fit gets its own W&B service, as a `vlbias fit` process does (not this process's, which it would
    # inherit through WANDB_SERVICE and leave holding the killed run's id)
    env = {key: value for key, value in os.environ.items() if not key.startswith("WANDB_SERVICE")}
    killed = subprocess.run(
        [sys.executable, "-c", "import sys; from vlbias.cli import main; main(sys.argv[1:])", *argv]
        + ["--trainer.callbacks", _callbacks(tmp_path, kill_at=5)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    last = tmp_path / "ckpt" / "last.ckpt"
    stored = torch.load(last, weights_only=True, mmap=True)
    assert stored["global_step"] == 4 and len(_run_ids(tmp_path / "wandb")) == 1
    (first_id,) = _run_ids(tmp_path / "wandb")
    assert stored[RUN_ID_KEY] == first_id

    main([*argv, "--trainer.callbacks", _callbacks(tmp_path, kill_at=None), "--ckpt_path", str(last)])
    wandb.finish()  # this process's run ends (a `vlbias fit` process ends with it)
    assert _run_ids(tmp_path / "wandb") == [first_id, first_id]  # one offline folder per attempt, one run id
    assert torch.load(last, weights_only=True, mmap=True)[RUN_ID_KEY] == first_id

    main([*argv, "--trainer.callbacks", _callbacks(tmp_path / "new", kill_at=None)])  # a new fit: a new run
    wandb.finish()
    assert len(set(_run_ids(tmp_path / "wandb"))) == 2

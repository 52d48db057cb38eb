"""Test-wide settings: offline, seeded, few threads."""

import logging
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models: threads cost more than they save


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def run_cli(capsys):
    """``run_cli(argv)`` runs ``vlbias argv`` in this process and returns (exit code, stdout, stderr)."""
    from vlbias.cli import main

    def run(argv: list[str]) -> tuple[int, str, str]:
        # Lightning's stream handlers hold the stderr of whatever first imported it (a test's capture, closed since,
        # when that was a test): point them at the process's stderr for the run, where they write in a full run, so
        # Lightning's banner ("GPU available: ...") stays out of `err` either way and nothing logs to a closed file.
        handlers = [
            handler
            for name in ("lightning", "lightning.pytorch", "lightning.fabric")
            for handler in logging.getLogger(name).handlers
            if isinstance(handler, logging.StreamHandler)
        ]
        streams = [handler.stream for handler in handlers]
        for handler in handlers:
            handler.stream = sys.__stderr__  # not setStream: it flushes the old stream, maybe closed
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
        finally:
            for handler, stream in zip(handlers, streams):
                handler.stream = stream
        out, err = capsys.readouterr()
        return code or 0, out, err

    return run


@pytest.fixture(autouse=True)
def _finish_wandb_run():
    """End a W&B run a test left open: the next WandbLogger in this process would otherwise reuse it (and write
    into the first test's folder)."""
    yield
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()

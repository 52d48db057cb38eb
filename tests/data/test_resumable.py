"""ResumableDataLoader: a run stopped mid-epoch and resumed from its checkpoint sees the batches an uninterrupted
run sees, so it ends with the same weights (as a preempted SLURM job must)."""

import lightning as L
import pytest
import torch
from torch.testing import assert_close

from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.data.resumable import ResumableDataLoader
from vlbias.modules import ContrastivePretraining, ModelSpec


def _loader(data, **options) -> ResumableDataLoader:
    return ResumableDataLoader(
        data, progress=lambda: (0, 0), batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(7), **options
    )


def test_a_restored_loader_replays_the_epoch_and_skips_the_completed_batches():
    data = list(range(20))
    first = _loader(data)
    epochs = [[batch.tolist() for batch in first] for _ in range(2)]  # two epochs: different orders
    assert epochs[0] != epochs[1] and sorted(sum(epochs[0], [])) == data

    replay = _loader(data)
    for _ in replay:  # the first epoch, whole
        pass
    middle = iter(replay)  # the second epoch, stopped after 4 of its 7 batches
    for _ in range(4):
        next(middle)
    state = replay.state_dict_at(completed=4, per_epoch=7)
    resumed = _loader(data)
    resumed.load_state_dict(state)
    assert [batch.tolist() for batch in resumed] == epochs[1][4:]


def test_a_checkpoint_after_the_last_batch_starts_the_next_epoch_as_it_would_have():
    data = list(range(20))
    reference = _loader(data)
    orders = [[batch.tolist() for batch in reference] for _ in range(2)]
    stopped = _loader(data)
    for _ in stopped:
        pass
    resumed = _loader(data)
    resumed.load_state_dict(stopped.state_dict_at(completed=7, per_epoch=7))
    assert [batch.tolist() for batch in resumed] == orders[1]


def test_a_state_of_another_kind_is_refused():
    with pytest.raises(ValueError, match="ResumableDataLoader state"):
        _loader(list(range(4))).load_state_dict({"skip": "two"})


class _StopAt(L.Callback):
    """Save a checkpoint at batch ``batch`` of epoch ``epoch``, before it (``hook="start"``) or after its step
    (``"end"``), as a preemption signal landing there would, and stop the run."""

    def __init__(self, epoch: int, batch: int, path, hook: str) -> None:
        self.epoch, self.batch, self.path, self.hook = epoch, batch, path, hook

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if self.hook == "start":
            self._stop(trainer, batch_idx)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if self.hook == "end":
            self._stop(trainer, batch_idx)

    def _stop(self, trainer, batch_idx: int) -> None:
        if trainer.current_epoch == self.epoch and batch_idx == self.batch:
            trainer.save_checkpoint(self.path)
            raise _Preempted


class _Preempted(Exception):
    """The end of a preempted run (the signal handler has saved its checkpoint)."""


def _fit(tmp_path, callbacks=(), ckpt_path=None) -> ContrastivePretraining:
    L.seed_everything(0, verbose=False)
    module = ContrastivePretraining(model=ModelSpec("clip", tiny=True))  # AdamW at 0.003, the quickstart's
    data = BiasWorldDataModule(bias_strength=0.9, n_train=96, eval_per_combination=1, image_size=32, batch_size=16)
    trainer = L.Trainer(
        max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
        default_root_dir=tmp_path, callbacks=list(callbacks),
    )  # fmt: skip
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    return module, trainer


@pytest.mark.parametrize(("hook", "batch", "steps_done"), [("start", 2, 6 + 2), ("end", 2, 6 + 3), ("end", 5, 12)])
def test_a_run_resumed_mid_epoch_ends_with_the_weights_of_an_uninterrupted_run(tmp_path, hook, batch, steps_done):
    reference, reference_trainer = _fit(tmp_path / "reference")
    checkpoint = tmp_path / "stopped.ckpt"
    with pytest.raises(_Preempted):
        _fit(tmp_path / "stopped", callbacks=[_StopAt(epoch=1, batch=batch, path=checkpoint, hook=hook)])
    assert torch.load(checkpoint, weights_only=True)["global_step"] == steps_done  # 6 batches per epoch
    resumed, resumed_trainer = _fit(tmp_path / "resumed", ckpt_path=checkpoint)
    assert resumed_trainer.global_step == reference_trainer.global_step == 12
    for (name, mine), theirs in zip(resumed.state_dict().items(), reference.state_dict().values(), strict=True):
        assert_close(mine, theirs, rtol=0, atol=1e-6, msg=name)

"""A training DataLoader that resumes mid-epoch where an interrupted run stopped, batch for batch.

Lightning saves a loader's ``state_dict`` in every checkpoint when the loader has one, and on a restart calls
``load_state_dict`` before it iterates again (``FitLoop.setup_data``); a loader without them starts the
epoch over after a mid-epoch restart (a preempted SLURM job), so the resumed run sees batches twice and
others never, and its weights differ from an uninterrupted run's. :class:`ResumableDataLoader` keeps
two things:

* the state of its shuffling ``generator`` when the current epoch's iterator was made (every draw of
  an epoch, the worker base seed and the sampler's permutation, comes from it, so restoring it replays the
  epoch's order exactly, with or without a ``DistributedSampler``, whose order is fixed by its epoch);
* the number of batches of the epoch the trainer processed (``progress``, read at save time from the
  trainer, not counted here: Lightning fetches ahead of the batch it trains on; a batch processed but not yet
  completed when the checkpoint was saved, in ``on_train_batch_end``, is counted completed on restart).

On restore the next iterator replays the epoch from its start and skips the completed batches (they are
loaded and dropped: cheap next to training on them). A checkpoint taken after the epoch's last batch keeps
the generator as it is, so the next epoch starts as it would have.

:class:`SplitLoaders` gives a LightningDataModule its four dataloaders, training through this one.

Why not ``torchdata``'s ``StatefulDataLoader``: it is a separate package pinned to torch versions, and this
state is two numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch.utils.data import DataLoader, Dataset

#: ``() -> (batches of the current epoch the trainer completed, batches per epoch or None if unknown)``.
Progress = Callable[[], tuple[int, int | float | None]]


def trainer_progress(datamodule: object) -> Progress:
    """The :data:`Progress` of the trainer ``datamodule`` is attached to when the state is saved (nothing
    completed when it has none: a loader used outside a trainer)."""

    def progress() -> tuple[int, int | float | None]:
        trainer = getattr(datamodule, "trainer", None)
        if trainer is None:
            return 0, None
        # processed, not completed: a checkpoint saved in on_train_batch_end (a SLURM signal landing there) has
        # the batch processed but not completed, and Lightning counts it completed on restart
        return trainer.fit_loop.epoch_loop.batch_progress.current.processed, trainer.num_training_batches

    return progress


class ResumableDataLoader(DataLoader):
    """A :class:`~torch.utils.data.DataLoader` with ``state_dict`` / ``load_state_dict`` (module docstring).

    Args:
        *args, **kwargs: as :class:`~torch.utils.data.DataLoader`; ``generator`` is required (the
            shuffling's random stream, seeded by the caller).
        progress: reads the trainer's completed batches of the current epoch and the batches per epoch,
            e.g. ``lambda: (loop.batch_progress.current.completed, trainer.num_training_batches)``.

    Example:
        >>> data = list(range(10))
        >>> def loader(): return ResumableDataLoader(data, progress=lambda: (2, 5), batch_size=2, shuffle=True,
        ...                                          generator=torch.Generator().manual_seed(0))
        >>> first = loader()
        >>> batches = [b.tolist() for b in first]
        >>> resumed = loader()
        >>> resumed.load_state_dict(first.state_dict_at(completed=2))
        >>> [b.tolist() for b in resumed] == batches[2:]
        True
    """

    def __init__(self, *args, progress: Progress, **kwargs) -> None:
        if kwargs.get("generator") is None:
            raise ValueError("ResumableDataLoader needs a seeded `generator` to replay an epoch.")
        super().__init__(*args, **kwargs)
        self.progress = progress
        self._epoch_start = self.generator.get_state()
        self._skip = 0

    def __iter__(self) -> Iterator:
        self._epoch_start = self.generator.get_state()
        skip, self._skip = self._skip, 0
        iterator = super().__iter__()
        for _ in range(skip):
            next(iterator, None)
        return iterator

    def state_dict(self) -> dict[str, object]:
        """The generator's state at this epoch's start and the batches the trainer completed in it (or, after
        the epoch's last batch, the generator as it is and nothing to skip)."""
        completed, per_epoch = self.progress()
        return self.state_dict_at(completed, per_epoch)

    def state_dict_at(self, completed: int, per_epoch: int | float | None = None) -> dict[str, object]:
        """:meth:`state_dict` for ``completed`` batches of an epoch of ``per_epoch`` (``None``: unknown)."""
        if per_epoch is not None and completed >= per_epoch:
            return {"generator": self.generator.get_state(), "skip": 0}
        return {"generator": self._epoch_start.clone(), "skip": int(completed)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Replay from the saved generator state, skipping the saved number of batches, at the next iteration."""
        generator, skip = state.get("generator"), state.get("skip")
        if not isinstance(generator, torch.Tensor) or not isinstance(skip, int) or skip < 0:
            raise ValueError(f"Expected a ResumableDataLoader state {{generator, skip}} but got keys {sorted(state)}.")
        self.generator.set_state(generator)
        self._skip = skip


class SplitLoaders:
    """A LightningDataModule's dataloaders over its splits: ``train`` shuffled by a generator seeded with
    ``hparams.seed`` and resumable mid-epoch (:class:`ResumableDataLoader`), ``val`` and ``test`` in order, and
    ``predict`` over ``hparams.predict_split``; ``hparams.batch_size`` items per batch, ``hparams.num_workers``
    worker processes (kept alive between epochs). The data module gives each split's dataset with
    ``_dataset(split)``, and ``collate_fn`` where its items need one."""

    collate_fn: Callable | None = None

    def _dataset(self, split: str) -> Dataset:
        raise NotImplementedError

    def train_dataloader(self) -> ResumableDataLoader:
        generator = torch.Generator().manual_seed(self.hparams.seed)
        return self._loader(
            "train", ResumableDataLoader, shuffle=True, generator=generator, progress=trainer_progress(self)
        )

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.hparams.predict_split)

    def _loader(self, split: str, kind: type[DataLoader] = DataLoader, **kwargs) -> DataLoader:
        return kind(
            self._dataset(split),
            batch_size=self.hparams.batch_size,
            num_workers=self.hparams.num_workers,
            persistent_workers=self.hparams.num_workers > 0,
            collate_fn=self.collate_fn,
            **kwargs,
        )

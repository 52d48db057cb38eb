"""LightningDataModules over the datasets in :mod:`vlbias.data`."""

from __future__ import annotations

from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader

from vlbias.data.biasworld import BiasWorld
from vlbias.data.resumable import ResumableTraining


class BiasWorldDataModule(ResumableTraining, LightningDataModule):
    """BiasWorld's ``train`` / ``val`` / ``test`` splits as dataloaders.

    Batches are dicts: ``pixel_values`` (B, 3, S, S) float in [0, 1], ``caption`` (list of B
    strings), ``group``, ``activity`` (B,) int and ``stereotyped`` (B,) bool. The world itself
    is ``self.world`` (bias suites read their stimuli from it).

    Args:
        bias_strength, n_train, eval_per_combination, image_size, neutral_caption_rate, seed,
        hidden_object_rate: see :class:`BiasWorld`.
        batch_size: items per batch.
        num_workers: dataloader worker processes.
        predict_split: the split ``predict_dataloader`` serves (e.g. to ``vlbias predict`` a pruning run).
    """

    def __init__(
        self,
        bias_strength: float = 0.5,
        n_train: int = 2048,
        eval_per_combination: int = 32,
        image_size: int = 64,
        neutral_caption_rate: float = 0.5,
        seed: int = 0,
        hidden_object_rate: float = 0.0,
        batch_size: int = 64,
        num_workers: int = 0,
        predict_split: str = "test",
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.world = BiasWorld(
            bias_strength, n_train, eval_per_combination, image_size, neutral_caption_rate, seed, hidden_object_rate
        )

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.hparams.predict_split)

    def _loader(self, split: str, kind: type[DataLoader] = DataLoader, **kwargs) -> DataLoader:
        return kind(
            self.world.dataset(split),
            batch_size=self.hparams.batch_size,
            num_workers=self.hparams.num_workers,
            persistent_workers=self.hparams.num_workers > 0,
            **kwargs,
        )

"""BiasWorld as a LightningDataModule."""

from __future__ import annotations

from lightning.pytorch import LightningDataModule

from vlbias.data.biasworld import BiasWorld, BiasWorldDataset
from vlbias.data.resumable import SplitLoaders


class BiasWorldDataModule(SplitLoaders, LightningDataModule):
    """BiasWorld's ``train`` / ``val`` / ``test`` splits as dataloaders.

    Batches are dicts: ``pixel_values`` (B, 3, S, S) float in [0, 1], ``caption`` (list of B
    strings), ``group``, ``activity`` (B,) int and ``stereotyped`` (B,) bool. The world itself
    is ``self.world`` (bias suites read their stimuli from it).

    Args:
        batch_size: items per batch.
        num_workers: dataloader worker processes.
        predict_split: the split ``predict_dataloader`` serves (e.g. to ``vlbias predict`` a pruning run).
        world: the world's own options, declared by :class:`BiasWorld` (``bias_strength``, ``n_train``,
            ``eval_per_combination``, ``image_size``, ``neutral_caption_rate``, ``seed``, which also seeds the
            training shuffle, and ``hidden_object_rate``); LightningCLI reads them from its signature, so a
            config sets them as ``data.init_args.bias_strength`` and so on.
    """

    def __init__(self, batch_size: int = 64, num_workers: int = 0, predict_split: str = "test", **world) -> None:
        super().__init__()
        self.world = BiasWorld(**world)
        loading = {"batch_size": batch_size, "num_workers": num_workers, "predict_split": predict_split}
        self.save_hyperparameters({**self.world.config, **loading})  # every option, the world's defaults too

    def _dataset(self, split: str) -> BiasWorldDataset:
        return self.world.dataset(split)

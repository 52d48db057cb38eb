"""BiasWorld-QA as a LightningDataModule."""

from __future__ import annotations

from dataclasses import asdict

from lightning.pytorch import LightningDataModule

from vlbias.data.biasworld_qa import BiasWorldQA, BiasWorldQADataset, collate_questions
from vlbias.data.biasworld_qa_options import BiasWorldQAOptions
from vlbias.data.resumable import SplitLoaders


class BiasWorldQADataModule(SplitLoaders, LightningDataModule):
    """BiasWorld-QA's ``train`` / ``val`` / ``test`` questions as dataloaders (:mod:`vlbias.data.biasworld_qa`).

    Batches are dicts of lists (:func:`~vlbias.data.biasworld_qa.collate_questions`): ``image`` and
    ``counterfactual_image`` (PIL), ``question``, ``options``, ``answer``, ``kinds``, and ``answer_index``, ``group``,
    ``ambiguous`` as tensors. The world itself is ``self.world``.

    Args:
        batch_size: questions per batch.
        num_workers: dataloader worker processes.
        predict_split: the split ``predict_dataloader`` serves.
        world: the world's options, declared by :class:`~vlbias.data.biasworld_qa_options.BiasWorldQAOptions`
            (``bias_strength``, ``n_train``, ``ambiguous_rate``, ``eval_per_combination``, ``image_size``, ``seed``, which
            also seeds the training shuffle); LightningCLI reads them from its signature, so a config sets them as
            ``data.init_args.bias_strength`` and so on.
    """

    collate_fn = staticmethod(collate_questions)

    def __init__(self, batch_size: int = 32, num_workers: int = 0, predict_split: str = "test", **world) -> None:
        super().__init__()
        options = BiasWorldQAOptions(**world)
        self.world = BiasWorldQA(options)
        loading = {"batch_size": batch_size, "num_workers": num_workers, "predict_split": predict_split}
        self.save_hyperparameters({**asdict(options), **loading})  # every option, the world's defaults too

    def _dataset(self, split: str) -> BiasWorldQADataset:
        return self.world.dataset(split)

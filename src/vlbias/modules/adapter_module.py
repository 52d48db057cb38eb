"""What every training module shares: one model adapter, built through the registry, an optimizer
and an optional learning-rate scheduler from configuration, and the export when fitting ends."""

from __future__ import annotations

from pathlib import Path

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities.types import OptimizerLRScheduler

from vlbias.errors import ConfigError
from vlbias.models.base import Capability, ModelAdapter, require_capability
from vlbias.models.registry import check_model_options, load
from vlbias.models.vocab import word_tokenizer

SCHEDULER_MONITOR = "val/loss"  # what a ReduceLROnPlateau scheduler watches; every module logs it


class AdapterModule(LightningModule):
    """Base of the training modules.

    A subclass passes its ``optimizer`` and ``scheduler`` arguments to ``__init__``, calls
    ``save_hyperparameters(ignore=["optimizer", "scheduler"])`` with ``learning_rate`` and
    ``weight_decay`` among its arguments, then :meth:`build_adapter`.

    In YAML (LightningCLI) the optimizer and scheduler are given by class and arguments, without
    the parameters or the optimizer, which the module passes in::

        model:
          init_args:
            optimizer: {class_path: torch.optim.SGD, init_args: {lr: 0.1, momentum: 0.9}}
            scheduler: {class_path: torch.optim.lr_scheduler.StepLR, init_args: {step_size: 5}}

    Args:
        optimizer: builds the optimizer from the parameters; ``None``: AdamW with the module's
            ``learning_rate`` and ``weight_decay`` (which a given optimizer does not read: give its
            ``lr`` in its own arguments).
        scheduler: builds a learning-rate scheduler from the optimizer, stepped once per epoch
            (a ``ReduceLROnPlateau`` watches ``val/loss``); ``None``: a constant learning rate.
    """

    adapter: ModelAdapter

    def __init__(
        self, optimizer: OptimizerCallable | None = None, scheduler: LRSchedulerCallable | None = None
    ) -> None:
        super().__init__()
        self.make_optimizer = optimizer
        self.make_scheduler = scheduler

    def build_adapter(
        self,
        model: str,
        checkpoint: str | None,
        tiny: bool,
        tiny_sizes: dict[str, int] | None,
        tiny_vocabulary: list[str] | None,
        seed: int,
        capability: Capability,
        purpose: str,
        model_options: dict[str, object] | None = None,
    ) -> None:
        """``self.adapter``: ``model`` from ``checkpoint``, or a tiny random one of ``tiny_sizes`` drawn
        with ``seed`` whose word-level tokenizer knows ``tiny_vocabulary`` (``None``: the tiny models'
        default words, :func:`vlbias.models.vocab.tiny_tokenizer`), through
        :func:`~vlbias.models.registry.load` (so a missing checkpoint or a size the adapter does not
        take is refused by name), on the CPU and in training mode; it must have ``capability``
        (``purpose`` names the training in the error). ``model_options``: the adapter's own loading
        options for a checkpoint (e.g. ALBEF's ``image_size: 384`` for retrieval fine-tuning)."""
        if tiny_vocabulary is not None and not tiny:
            raise ConfigError("`tiny_vocabulary` is the vocabulary of a tiny model; it needs `tiny: true`.")
        if tiny_sizes and not tiny:
            raise ConfigError("`tiny_sizes` are the sizes of a tiny model; it needs `tiny: true`.")
        options = dict(model_options or {}) or None
        if tiny:
            options = {**(model_options or {}), **(tiny_sizes or {}), "seed": seed}
            if tiny_vocabulary is not None:
                options["tokenizer"] = word_tokenizer(tiny_vocabulary)
        check_model_options(model, options, tiny)  # where a module's model options enter; load takes them checked
        self.adapter = load(model, checkpoint=checkpoint, tiny=tiny, device="cpu", options=options).train()
        require_capability(self.adapter, capability, suite=purpose)

    def configure_optimizers(self) -> OptimizerLRScheduler:
        if self.make_optimizer is None:
            rate, decay = self.hparams.learning_rate, self.hparams.weight_decay
            optimizer = torch.optim.AdamW(self.parameters(), lr=rate, weight_decay=decay)
        else:
            optimizer = self.make_optimizer(self.parameters())
        if self.make_scheduler is None:
            return optimizer
        scheduler = {"scheduler": self.make_scheduler(optimizer), "interval": "epoch", "monitor": SCHEDULER_MONITOR}
        return {"optimizer": optimizer, "lr_scheduler": scheduler}

    def on_fit_end(self) -> None:
        """Rank 0 exports the adapter with ``save_pretrained`` to ``<log_dir>/model`` (not in ``fast_dev_run``),
        with its model card (:func:`vlbias.report.model_card.training_card`: bias and ``val/`` accuracies of the
        first and last epochs). Every rank reads ``trainer.log_dir``: under DDP it is a broadcast that all
        ranks must join."""
        from vlbias.report.model_card import training_card, write_model_card

        log_dir = self.trainer.log_dir
        if log_dir is not None and not self.trainer.fast_dev_run and self.trainer.is_global_zero:
            self.adapter.save_pretrained(Path(log_dir) / "model")
            datamodule = getattr(self.trainer, "datamodule", None)
            data = {} if datamodule is None else {"datamodule": type(datamodule).__name__, **datamodule.hparams}
            card = training_card(log_dir, type(self).__name__, dict(self.hparams), data)
            write_model_card(Path(log_dir) / "model", card)

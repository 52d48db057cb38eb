"""What every training module shares: one model adapter built from a :class:`~vlbias.modules.model_spec.ModelSpec`,
an optimizer and an optional learning-rate scheduler from configuration, and the export when fitting ends."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, is_dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.strategies import FSDPStrategy
from lightning.pytorch.utilities.types import OptimizerLRScheduler
from torch import nn
from torch.optim import Optimizer

from vlbias.models.base import Capability, ModelAdapter
from vlbias.modules.model_spec import ModelSpec

SCHEDULER_MONITOR = "val/loss"  # what a ReduceLROnPlateau scheduler watches; every module logs it
#: Lightning's own instantiator of LightningCLI-built modules, which ``load_from_checkpoint`` trusts.
CLI_INSTANTIATOR = "lightning.pytorch.cli.instantiate_module"


class AdapterModule(LightningModule):
    """Base of the training modules: ``self.adapter`` is built from ``model`` in training mode.

    A subclass names what its adapter must compute (:attr:`capability`) and its training (:attr:`purpose`, in
    refusals), takes ``model``, ``optimizer`` and ``scheduler`` and passes them to ``__init__``, and gives the
    optimizer's default as a lambda, from which LightningCLI reads the class and its arguments (a config and
    ``--print_config`` show them)::

        optimizer: OptimizerCallable = lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)

    In YAML the optimizer and scheduler are given by class and arguments, without the parameters or the optimizer,
    which the module passes in (``--model.init_args.optimizer.lr 0.01`` changes one argument)::

        model:
          init_args:
            optimizer: {class_path: torch.optim.AdamW, init_args: {lr: 0.003, weight_decay: 0.01}}
            scheduler: {class_path: torch.optim.lr_scheduler.StepLR, init_args: {step_size: 5}}

    The hyperparameters (``hparams``, saved in checkpoints) hold plain values only, so that a checkpoint loads with
    ``torch.load(weights_only=True)``: the model spec and other settings groups as mappings, the optimizer and
    scheduler (and any other optimizer a module takes) as LightningCLI's ``class_path`` specs where LightningCLI
    built the module (a callable given in Python has no such form and is left out). ``load_from_checkpoint``
    rebuilds a module from them through LightningCLI's instantiator, whichever way it was built: the module trains
    with the optimizer its checkpoint names (its own ``hparams`` then leave the optimizer out, as for any module
    built outside LightningCLI). Checkpoints written
    before the model spec (``model: clip`` with ``tiny``, ``learning_rate``, ... beside it) do not load into these
    modules.

    Under FSDP (Lightning's ``FSDPStrategy``, ``configs/trainer/fsdp.yaml``) the parameters are sharded across
    ranks, except the 0-d ones (a temperature, CLIP's logit scale), which torch's FSDP cannot shard: they are
    left out of it (its ``ignored_states``), kept whole on every rank, and their gradients averaged across ranks
    before every optimizer step, as DDP averages every gradient. Code that runs the adapter outside a training,
    validation or test step (the export, ALBEF's re-ranking at the epoch's end) runs it in
    :meth:`full_parameters`.

    Args:
        model: the adapter to train (:class:`~vlbias.modules.model_spec.ModelSpec`).
        optimizer: builds the optimizer from the parameters.
        scheduler: builds a learning-rate scheduler from the optimizer, stepped once per epoch (a
            ``ReduceLROnPlateau`` watches ``val/loss``); ``None``: a constant learning rate.
    """

    capability: Capability
    purpose: str
    adapter: ModelAdapter

    def __init__(self, model: ModelSpec, optimizer: OptimizerCallable, scheduler: LRSchedulerCallable | None) -> None:
        super().__init__()
        self.save_hyperparameters()  # every __init__ argument of the subclass, collected from its frame
        for key, value in list(self.hparams.items()):
            if is_dataclass(value):
                self.hparams[key] = asdict(value)
            elif callable(value):  # an optimizer or scheduler callable given in Python
                del self.hparams[key]
        self.hparams.setdefault("_instantiator", CLI_INSTANTIATOR)
        self.spec = model
        self.make_optimizer = optimizer
        self.make_scheduler = scheduler
        self.adapter = model.load(self.capability, self.purpose).train()
        self.unsharded: list[nn.Parameter] = []  # under FSDP, the 0-d parameters it leaves whole (class docstring)

    @property
    def sharded(self) -> bool:
        """Whether this module trains under Lightning's ``FSDPStrategy`` (``False`` outside a trainer)."""
        return self._trainer is not None and isinstance(self._trainer.strategy, FSDPStrategy)

    def configure_model(self) -> None:
        """Under FSDP: hand the 0-d parameters to FSDP as ``ignored_states`` (class docstring), on the strategy's
        device (FSDP moves only what it shards). Other strategies, and outside a trainer (``load_from_checkpoint``):
        nothing."""
        if not self.sharded:
            return
        strategy = self._trainer.strategy
        self.unsharded = [parameter for parameter in self.parameters() if parameter.ndim == 0]
        for parameter in self.unsharded:
            parameter.data = parameter.data.to(strategy.root_device)
        ignored = list(strategy.kwargs.get("ignored_states", ()))
        strategy.kwargs["ignored_states"] = ignored + [p for p in self.unsharded if all(p is not q for q in ignored)]

    def on_before_optimizer_step(self, optimizer: Optimizer) -> None:
        """Under FSDP: average the gradients of the parameters it leaves whole across ranks (a rank on which one
        got none adds zero)."""
        if not self.unsharded or self.trainer.world_size == 1:
            return
        for parameter in self.unsharded:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
            dist.all_reduce(parameter.grad)
            parameter.grad /= self.trainer.world_size

    def full_parameters(self, rank_zero_only: bool = False) -> AbstractContextManager:
        """A context in which the adapter holds its whole parameters: under FSDP its shards gathered (on every
        rank, or on rank 0 alone with ``rank_zero_only``, then in CPU memory; every rank must enter it, and
        changes made inside are not kept); otherwise nothing to do."""
        if not self.sharded:
            return nullcontext()
        from torch.distributed.fsdp import FullyShardedDataParallel

        return FullyShardedDataParallel.summon_full_params(
            self.trainer.model, writeback=False, rank0_only=rank_zero_only, offload_to_cpu=rank_zero_only
        )

    def configure_optimizers(self) -> OptimizerLRScheduler:
        optimizer = self.make_optimizer(self.parameters())
        if self.make_scheduler is None:
            return optimizer
        scheduler = {"scheduler": self.make_scheduler(optimizer), "interval": "epoch", "monitor": SCHEDULER_MONITOR}
        return {"optimizer": optimizer, "lr_scheduler": scheduler}

    def export(self, folder: Path) -> None:
        """Write the trained model to ``folder`` (the adapter's ``save_pretrained``)."""
        self.adapter.save_pretrained(folder)

    def on_fit_end(self) -> None:
        """Rank 0 exports the adapter with ``save_pretrained`` to ``<log_dir>/model`` (not in ``fast_dev_run``),
        with its model card (:func:`vlbias.report.model_card.training_card`: bias and ``val/`` accuracies of the
        first and last epochs). Every rank reads ``trainer.log_dir``: under DDP it is a broadcast that all
        ranks must join; under FSDP every rank joins the gathering of the parameters (:meth:`full_parameters`)."""
        from vlbias.report.model_card import training_card, write_model_card

        log_dir = self.trainer.log_dir
        if log_dir is None or self.trainer.fast_dev_run:
            return
        with self.full_parameters(rank_zero_only=True):
            if not self.trainer.is_global_zero:
                return
            self.export(Path(log_dir) / "model")
        datamodule = getattr(self.trainer, "datamodule", None)
        data = {} if datamodule is None else {"datamodule": type(datamodule).__name__, **datamodule.hparams}
        spec = asdict(self.spec)
        settings = {"model": spec.pop("name"), **spec}
        settings.update((key, value) for key, value in self.hparams.items() if key != "model")
        card = training_card(log_dir, type(self).__name__, settings, data)
        write_model_card(Path(log_dir) / "model", card)

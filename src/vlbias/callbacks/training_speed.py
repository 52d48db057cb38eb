"""The GPU speed switches of a training run, set in its config (``configs/trainer/gpu_fast.yaml``)."""

from __future__ import annotations

import logging

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.strategies import FSDPStrategy, Strategy
from typing_extensions import override

from vlbias.errors import ConfigError
from vlbias.models.speed import compile_layers, to_channels_last
from vlbias.modules.adapter_module import AdapterModule

log = logging.getLogger(__name__)


class TrainingSpeed(Callback):
    """Switches that make a vlbias training step faster or its batch larger without changing what it computes,
    applied to the module's adapter in place when the trainer sets up (Lightning's ``setup`` hook: before the
    optimizer is built and before DDP or FSDP wraps the model)::

        trainer:
          callbacks:
            - class_path: vlbias.callbacks.TrainingSpeed
              init_args: {compile: true, channels_last: false, gradient_checkpointing: false}

    bf16 mixed precision is the trainer's ``precision: bf16-mixed`` and AdamW's fused kernel the optimizer's
    ``fused: true``; neither is here. ``scripts/bench_throughput.py`` applies these switches through this callback,
    so what it measures is what a run gets.

    Args:
        compile: ``torch.compile`` of each transformer layer of the adapter, in place
            (:func:`vlbias.models.speed.compile_layers`): the first steps compile, later ones run fused kernels.
            Dropout masks come from Inductor's own generator, so a seeded compiled run repeats itself but does not
            give an eager run's numbers; ``torch._inductor.config.fallback_random = True`` draws them as eager
            does, and then a compiled ALBEF under DDP logs eager's losses to 1e-4 (``tests/modules/test_fsdp.py``).
            Refused under FSDP: each layer is its own FSDP unit, and Dynamo fails on its sharded parameters (torch
            2.14, two CPU processes: "attempting to assign a gradient of size ... to a tensor of size ...").
        channels_last: the adapter's 4-D tensors in channels-last memory format
            (:func:`vlbias.models.speed.to_channels_last`): in a ViT only the patch embedding's convolution weight,
            whose convolution then converts its pixels itself. Refused under FSDP, which flattens every parameter
            into a contiguous shard and so undoes the layout.
        gradient_checkpointing: each transformer layer recomputes its activations in the backward pass instead of
            keeping them (:meth:`vlbias.models.base.ModelAdapter.enable_gradient_checkpointing`): the same loss and
            gradients in less memory, for a larger batch, at the cost of a second forward pass of the layers. A
            family without it is refused, naming it; so is FSDP's own ``activation_checkpointing_policy`` beside it.
    """

    def __init__(self, compile: bool = False, channels_last: bool = False, gradient_checkpointing: bool = False):
        self.compile = compile
        self.channels_last = channels_last
        self.gradient_checkpointing = gradient_checkpointing

    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if not isinstance(pl_module, AdapterModule):
            raise ConfigError(
                f"TrainingSpeed expects a vlbias training module (vlbias.modules.AdapterModule) but got "
                f"{type(pl_module).__name__}."
            )
        self.check_strategy(trainer.strategy)
        adapter = pl_module.adapter
        if self.channels_last:
            to_channels_last(adapter)
        if self.gradient_checkpointing:
            adapter.enable_gradient_checkpointing()
        if self.compile:
            compiled = compile_layers(adapter)
            if not compiled:
                raise ConfigError(f"TrainingSpeed(compile=True) found no transformer layer in model {adapter.name!r}.")
            log.info("TrainingSpeed: compiled %d transformer layers of %s", compiled, adapter.name)

    def check_strategy(self, strategy: Strategy) -> None:
        """Refuse, in one line naming the option and the strategy, a switch that cannot work under ``strategy``."""
        if not isinstance(strategy, FSDPStrategy):
            return
        name = type(strategy).__name__
        if self.channels_last:
            raise ConfigError(
                f"TrainingSpeed's `channels_last` does nothing under {name}: FSDP flattens every parameter into a "
                "contiguous shard, which undoes the layout; set it to false."
            )
        if self.compile:
            raise ConfigError(
                f"TrainingSpeed's `compile` does not work under {name}: torch's Dynamo fails on the layers FSDP shards "
                "(each is its own FSDP unit); set it to false, or train under ddp.yaml."
            )
        if self.gradient_checkpointing and strategy._activation_checkpointing_kwargs:
            raise ConfigError(
                f"TrainingSpeed's `gradient_checkpointing` and {name}'s activation_checkpointing_policy both "
                "checkpoint the layers; keep one of them."
            )

"""TrainingSpeed: the switches reach the adapter before the optimizer is built and training is unchanged; a module
that is not vlbias's, and a switch that cannot work under FSDP, are refused in one line."""

from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy

from vlbias.callbacks import TrainingSpeed
from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.errors import ConfigError
from vlbias.models.families.albef_modeling import ALBEFLayer
from vlbias.models.registry import load
from vlbias.modules import ModelSpec, RetrievalFinetuning

PATCH_WEIGHT = "model.vision_model.embeddings.patch_embedding.weight"


def _trainer(tmp_path: Path, *callbacks, **options) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        devices=1,
        default_root_dir=tmp_path,
        max_steps=2,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=L.pytorch.loggers.CSVLogger(tmp_path),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
        **options,
    )


def _fit(tmp_path: Path, *callbacks) -> tuple[RetrievalFinetuning, list[float]]:
    """Two steps of tiny CLIP's retrieval fine-tuning, seeded, and the losses of those steps."""
    torch.manual_seed(0)
    module = RetrievalFinetuning(model=ModelSpec("clip", tiny=True))
    data = BiasWorldDataModule(n_train=16, eval_per_combination=1, image_size=64, batch_size=8)
    losses: list[float] = []

    class Losses(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            losses.append(float(outputs["loss"]))

    _trainer(tmp_path, *callbacks, Losses()).fit(module, data)
    return module, losses


def test_the_switches_reach_the_adapter_and_train_as_without_them(tmp_path):
    """channels-last and gradient checkpointing: the same two losses as without, and the export after the fit
    (channels-last weights written as the family writes them) loads back to the trained weights."""
    plain, losses = _fit(tmp_path / "plain")
    speed = TrainingSpeed(channels_last=True, gradient_checkpointing=True)
    module, switched = _fit(tmp_path / "switched", speed)
    assert len(losses) == 2 and switched == pytest.approx(losses, abs=1e-6)
    adapter = module.adapter
    assert dict(adapter.named_parameters())[PATCH_WEIGHT].is_contiguous(memory_format=torch.channels_last)
    assert adapter.model.vision_model.encoder.layers[0].gradient_checkpointing
    exported = load("clip", checkpoint=next((tmp_path / "switched").rglob("model")), device="cpu")
    for name, weight in exported.state_dict().items():
        torch.testing.assert_close(weight, adapter.state_dict()[name], rtol=0, atol=0, msg=name)


def test_compile_compiles_each_layer_before_the_optimizer_is_built(tmp_path):
    module = RetrievalFinetuning(model=ModelSpec("albef", tiny=True))
    TrainingSpeed(compile=True).setup(_trainer(tmp_path), module, "fit")
    layers = [layer for layer in module.adapter.modules() if isinstance(layer, ALBEFLayer)]
    assert layers and all(layer._compiled_call_impl is not None for layer in layers)


def test_a_module_that_is_not_vlbias_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"^TrainingSpeed expects a vlbias training module .* but got BoringModel\.$"):
        TrainingSpeed(compile=True).setup(_trainer(tmp_path), BoringModel(), "fit")


def test_switches_that_cannot_work_under_fsdp_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"`channels_last` does nothing under FSDPStrategy"):
        TrainingSpeed(channels_last=True).check_strategy(FSDPStrategy())
    with pytest.raises(ConfigError, match=r"`compile` does not work under FSDPStrategy: .* train under ddp.yaml\.$"):
        TrainingSpeed(compile=True).check_strategy(FSDPStrategy())
    checkpointing = FSDPStrategy(activation_checkpointing_policy={ALBEFLayer})
    with pytest.raises(ConfigError, match=r"`gradient_checkpointing` and FSDPStrategy's activation_checkpointing"):
        TrainingSpeed(gradient_checkpointing=True).check_strategy(checkpointing)
    TrainingSpeed(gradient_checkpointing=True).check_strategy(FSDPStrategy())  # the same losses as without it
    TrainingSpeed(compile=True, channels_last=True).check_strategy(DDPStrategy())

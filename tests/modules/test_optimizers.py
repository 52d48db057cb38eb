"""Training modules take their optimizer and learning-rate scheduler from configuration
(LightningCLI's ``OptimizerCallable`` / ``LRSchedulerCallable``), AdamW by default."""

from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch import LightningModule

from vlbias.lightning_cli import make_cli
from vlbias.modules import ContrastivePretraining, MaskedLMPretraining

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--data.init_args.n_train", "8", "--data.init_args.eval_per_combination", "1"]


def configured_module(tmp_path: Path, experiment: str, init_args: dict) -> LightningModule:
    """The model of ``configs/experiment/<experiment>.yaml`` with ``init_args`` stacked on it by a YAML file."""
    delta = tmp_path / "delta.yaml"
    delta.write_text(yaml.safe_dump({"model": {"init_args": init_args}}))
    experiment_config = ROOT / "configs" / "experiment" / f"{experiment}.yaml"
    return make_cli(["--config", str(experiment_config), "--config", str(delta), *SMALL], run=False).model


@pytest.mark.parametrize("experiment", ["quickstart", "biasworld_mlm"])
def test_yaml_optimizer_and_scheduler_are_used(tmp_path, experiment):
    module = configured_module(
        tmp_path,
        experiment,
        {
            "optimizer": {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.1, "momentum": 0.5}},
            "scheduler": {"class_path": "torch.optim.lr_scheduler.StepLR", "init_args": {"step_size": 3, "gamma": 0.5}},
        },
    )
    configured = module.configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    assert isinstance(optimizer, torch.optim.SGD)
    assert optimizer.defaults["lr"] == 0.1 and optimizer.defaults["momentum"] == 0.5
    assert {id(p) for group in optimizer.param_groups for p in group["params"]} == {id(p) for p in module.parameters()}
    assert isinstance(scheduler, torch.optim.lr_scheduler.StepLR) and scheduler.optimizer is optimizer
    assert (scheduler.step_size, scheduler.gamma) == (3, 0.5)
    assert configured["lr_scheduler"]["interval"] == "epoch"


def test_without_an_optimizer_the_default_is_adamw_with_the_configured_rate(tmp_path):
    module = configured_module(tmp_path, "quickstart", {"weight_decay": 0.05})
    optimizer = module.configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.defaults["lr"] == 0.003 and optimizer.defaults["weight_decay"] == 0.05  # quickstart's rate


def test_reduce_on_plateau_watches_the_validation_loss():
    module = ContrastivePretraining(
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
        scheduler=lambda optimizer: torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1),
    )
    assert module.configure_optimizers()["lr_scheduler"]["monitor"] == "val/loss"


def test_the_optimizer_is_not_a_hyperparameter():
    module = MaskedLMPretraining(optimizer=lambda params: torch.optim.SGD(params, lr=0.1))
    assert "optimizer" not in module.hparams and "scheduler" not in module.hparams
    assert isinstance(module.configure_optimizers(), torch.optim.SGD)

"""Training modules take their optimizer and learning-rate scheduler from configuration
(LightningCLI's ``OptimizerCallable`` / ``LRSchedulerCallable``), AdamW by default."""

from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LightningArgumentParser

from vlbias.commands.lightning_cli import make_cli
from vlbias.modules import ContrastivePretraining, MaskedLMPretraining, RetrievalFinetuning

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


def test_one_optimizer_argument_given_keeps_the_others(tmp_path):
    module = configured_module(tmp_path, "quickstart", {"optimizer": {"init_args": {"weight_decay": 0.05}}})
    optimizer = module.configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.defaults["lr"] == 0.003 and optimizer.defaults["weight_decay"] == 0.05  # quickstart's rate


@pytest.mark.parametrize(
    "module_class, rate", [(ContrastivePretraining, 3e-3), (MaskedLMPretraining, 1e-3), (RetrievalFinetuning, 1e-3)]
)
def test_the_default_optimizer_is_adamw_in_python_and_in_the_printed_config(module_class, rate):
    """The default is a lambda whose class and arguments LightningCLI reads from its source: ``--print_config``
    shows them as a ``class_path`` spec, and the module built in Python makes the same optimizer."""
    parser = LightningArgumentParser()
    parser.add_lightning_class_args(module_class, "model")
    printed = yaml.safe_load(parser.dump(parser.get_defaults()))["model"]["optimizer"]
    assert printed["class_path"] == "torch.optim.AdamW"
    assert (printed["init_args"]["lr"], printed["init_args"]["weight_decay"]) == (rate, 0.01)
    optimizer = module_class().configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    assert (optimizer.defaults["lr"], optimizer.defaults["weight_decay"]) == (rate, 0.01)


def test_reduce_on_plateau_watches_the_validation_loss():
    module = ContrastivePretraining(
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
        scheduler=lambda optimizer: torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1),
    )
    assert module.configure_optimizers()["lr_scheduler"]["monitor"] == "val/loss"


def test_an_optimizer_given_in_python_is_not_a_hyperparameter_one_from_the_cli_is(tmp_path):
    """A callable has no serialisable form; LightningCLI's ``class_path`` spec is kept (a checkpoint records it)."""
    module = MaskedLMPretraining(optimizer=lambda params: torch.optim.SGD(params, lr=0.1))
    assert "optimizer" not in module.hparams and module.hparams["scheduler"] is None
    assert isinstance(module.configure_optimizers(), torch.optim.SGD)
    configured = configured_module(tmp_path, "quickstart", {})
    assert configured.hparams["optimizer"]["class_path"] == "torch.optim.AdamW"
    assert configured.hparams["optimizer"]["init_args"]["lr"] == 0.003

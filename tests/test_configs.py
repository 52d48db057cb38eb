"""Every YAML in configs/ and callbacks/ parses and instantiates (LightningCLI with run=False)."""

from pathlib import Path

import pytest
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI

from vlbias.callbacks import BiasSuiteCallback
from vlbias.cli import measure_parser

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"
SMALL = ["--data.init_args.n_train", "8", "--data.init_args.eval_per_combination", "1"]


def instantiate(*configs: Path, extra: tuple[str, ...] = ()) -> LightningCLI:
    args = [arg for config in configs for arg in ("--config", str(config))]
    return LightningCLI(
        LightningModule,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        args=[*args, *SMALL, *extra],
        run=False,
    )


@pytest.mark.parametrize("experiment", sorted((ROOT / "configs" / "experiment").glob("*.yaml")), ids=lambda p: p.stem)
def test_experiment_configs_instantiate(experiment):
    cli = instantiate(experiment)
    assert cli.model is not None and cli.datamodule is not None


@pytest.mark.parametrize(
    "delta",
    sorted(p for folder in ("trainer", "logger", "data", "debug") for p in (ROOT / "configs" / folder).glob("*.yaml"))
    + sorted((ROOT / "callbacks").glob("*.yaml")),
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_delta_configs_stack_on_the_quickstart(delta, tmp_path):
    if delta.stem == "gpu_bf16":
        pytest.skip("needs a GPU to instantiate the trainer")
    cli = instantiate(QUICKSTART, delta, extra=("--trainer.default_root_dir", str(tmp_path)))
    if delta.parent.name == "callbacks":
        assert any(isinstance(c, BiasSuiteCallback) for c in cli.trainer.callbacks)
    if delta.stem == "fdr":
        assert cli.trainer.fast_dev_run


def test_wandb_config_selects_an_offline_wandb_logger(tmp_path):
    cli = instantiate(
        QUICKSTART,
        ROOT / "configs" / "logger" / "wandb.yaml",
        extra=("--trainer.logger.init_args.save_dir", str(tmp_path)),
    )
    assert type(cli.trainer.logger).__name__ == "WandbLogger"
    assert cli.config["trainer"]["logger"]["init_args"]["offline"] is True


@pytest.mark.parametrize("suite_config", sorted((ROOT / "configs" / "suite").glob("*.yaml")), ids=lambda p: p.stem)
def test_suite_configs_are_measure_configs(suite_config):
    args = measure_parser().parse_args(["--config", str(suite_config), "--model", "clip", "--tiny", "--out", "unused"])
    assert args.suite

"""Every YAML in configs/ and callbacks/ parses and instantiates (LightningCLI with run=False)."""

from pathlib import Path

import pytest
import torch
import yaml

from tests.data.corpus import write_karpathy_corpus
from vlbias.callbacks import BiasSuiteCallback, TrainingSpeed
from vlbias.commands.lightning_cli import VlbiasCLI, make_cli
from vlbias.commands.measure import parser as measure_parser

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"
SMALL = ["--data.init_args.n_train", "8", "--data.init_args.eval_per_combination", "1"]
CAPTION_DATA = "vlbias.data.caption_datamodule.CaptionDataModule"


def instantiate(*configs: Path, extra: tuple[str, ...] = (), small: tuple[str, ...] = tuple(SMALL)) -> VlbiasCLI:
    args = [arg for config in configs for arg in ("--config", str(config))]
    return make_cli([*args, *small, *extra], run=False)


def small_args(configs: tuple[Path, ...], tmp_path: Path) -> tuple[str, ...]:
    """A tiny random model in place of a config's pretrained weights (a checkpoint this machine lacks: the
    quickstart's export that DebiasCLIP starts from, COCO's ALBEF); BiasWorld's size overrides, or, where the last
    config's data is a local caption corpus (COCO), which this machine lacks: the data module pointed at a tiny
    Karpathy corpus written here, and one CPU in place of GPUs. Everything else of the config is kept."""
    sections = [yaml.safe_load(config.read_text()) or {} for config in configs]
    model = next((section["model"] for section in reversed(sections) if "model" in section), {})
    tiny = ["--model.init_args.model", "{tiny: true, checkpoint: null}"]
    tiny = tiny if model.get("init_args", {}).get("model", {}).get("checkpoint") else []
    data = next((section["data"] for section in reversed(sections) if "data" in section), {})
    if data.get("class_path") != CAPTION_DATA:
        return (*SMALL, *tiny)
    args = ["--data.init_args.annotations", str(write_karpathy_corpus(tmp_path))]
    args += ["--data.init_args.image_root", str(tmp_path / "images"), "--data.init_args.num_workers", "0"]
    args += tiny
    trainer = next((section["trainer"] for section in reversed(sections) if "trainer" in section), {})
    if trainer.get("accelerator") == "gpu":
        args += ["--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.strategy", "auto"]
        args += ["--trainer.precision", "32-true"]
    return tuple(args)


@pytest.mark.parametrize("experiment", sorted((ROOT / "configs" / "experiment").glob("*.yaml")), ids=lambda p: p.stem)
def test_experiment_configs_instantiate(experiment, tmp_path):
    cli = instantiate(experiment, small=small_args((experiment,), tmp_path))
    assert cli.model is not None and cli.datamodule is not None


@pytest.mark.parametrize(
    "delta",
    sorted(p for folder in ("trainer", "logger", "data", "debug") for p in (ROOT / "configs" / folder).glob("*.yaml"))
    + sorted((ROOT / "callbacks").glob("*.yaml")),
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_delta_configs_stack_on_the_quickstart(delta, tmp_path):
    if delta.stem == "fsdp":  # its strategy is built from its YAML in tests/modules/test_fsdp.py
        pytest.skip("needs GPUs to instantiate the trainer")
    small = small_args((QUICKSTART, delta), tmp_path)
    gpu = (yaml.safe_load(delta.read_text()) or {}).get("trainer", {}).get("accelerator") == "gpu"
    on_the_cpu = ("--trainer.accelerator", "cpu", "--trainer.precision", "32-true") if gpu else ()
    extra = ("--trainer.default_root_dir", str(tmp_path), *on_the_cpu)
    cli = instantiate(QUICKSTART, delta, extra=extra, small=small)
    if delta.parent.name == "callbacks" or delta.stem == "gpu_fast":  # gpu_fast appends its callback to the list
        assert any(isinstance(c, BiasSuiteCallback) for c in cli.trainer.callbacks)
    if delta.stem == "gpu_fast":
        (speed,) = [c for c in cli.trainer.callbacks if isinstance(c, TrainingSpeed)]
        assert (speed.compile, speed.channels_last, speed.gradient_checkpointing) == (True, False, False)
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


def test_the_coco_experiment_keeps_the_papers_settings(tmp_path):
    experiment = ROOT / "configs" / "experiment" / "fairvlp_coco.yaml"
    cli = instantiate(experiment, small=small_args((experiment,), tmp_path))
    optimizer = cli.model.configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    assert (optimizer.defaults["lr"], optimizer.defaults["weight_decay"]) == (1e-4, 0.02)
    assert cli.model.method.counterfactual_targets == "factual"  # Eq. 15: M in both terms
    devices = yaml.safe_load(experiment.read_text())["trainer"]["devices"]
    assert cli.datamodule.hparams.batch_size * devices == 256


#: Each training experiment's optimizer as its config gave it before the model spec (``learning_rate``,
#: ``weight_decay`` beside the model, AdamW by default): the move to ``optimizer: {class_path, init_args}`` kept them.
OPTIMIZERS = {
    "biasworld_caption_selection": (0.003, 0.01),
    "biasworld_mlm": (0.002, 0.01),
    "fairvlp_biasworld": (0.002, 0.01),
    "fairvlp_coco": (1e-4, 0.02),
    "quickstart": (0.003, 0.01),
    "biasworld_qa_consistency": (0.003, 0.01),
    "retrieval_biasworld": (0.003, 0.01),
    "retrieval_coco": (1e-5, 0.02),
    "retrieval_flickr30k": (1e-5, 0.02),
}


@pytest.mark.parametrize("experiment", sorted(OPTIMIZERS))
def test_every_training_experiment_keeps_its_optimizer(experiment, tmp_path):
    config = ROOT / "configs" / "experiment" / f"{experiment}.yaml"
    configured = instantiate(config, small=small_args((config,), tmp_path)).model.configure_optimizers()
    optimizer = configured["optimizer"] if isinstance(configured, dict) else configured
    assert type(optimizer) is torch.optim.AdamW
    defaults = optimizer.defaults
    assert (defaults["lr"], defaults["weight_decay"]) == OPTIMIZERS[experiment]
    assert (tuple(defaults["betas"]), defaults["eps"], defaults["amsgrad"]) == ((0.9, 0.999), 1e-8, False)


#: Training experiments written after the model spec, whose optimizers their own tests check (two optimizers:
#: tests/modules/test_prompt_array.py; tests/modules/test_chat_answer_tuning.py).
NEWER_EXPERIMENTS = {"debiasclip_biasworld", "biasworld_qa_answers"}


def test_every_training_experiment_has_its_optimizer_listed():
    training = {p.stem for p in (ROOT / "configs" / "experiment").glob("*.yaml") if not p.stem.startswith("prune")}
    assert training - NEWER_EXPERIMENTS == set(OPTIMIZERS)

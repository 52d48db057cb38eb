"""Training modules take their model as one ModelSpec: LightningCLI reads it from YAML and from flags (and can link a
run seed to it), its checks come first, and a checkpoint's plain hyperparameters load back into the module."""

from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from lightning.pytorch import LightningModule

from vlbias.commands.lightning_cli import VlbiasCLI, make_cli
from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.errors import CapabilityError, ConfigError
from vlbias.models.base import Capability
from vlbias.modules import ContrastivePretraining, FairVLP, FairVLPMethod, ModelSpec

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"
CPU = ROOT / "configs" / "trainer" / "cpu.yaml"
SMALL = ["--data.init_args.n_train", "8", "--data.init_args.eval_per_combination", "1"]
TINY = {"image_size": 32, "patch_size": 8}


def cli_of(*args: str) -> VlbiasCLI:
    return make_cli([*args, *SMALL], run=False)


def test_the_model_spec_is_read_from_yaml(tmp_path):
    config = tmp_path / "retrieval.yaml"
    model = {"name": "albef", "tiny": True, "tiny_sizes": TINY, "tiny_vocabulary": ["a", "man", "cooking"], "seed": 3}
    config.write_text(yaml.safe_dump({"model": {"init_args": {"model": model}}}))
    cli = cli_of("--config", str(QUICKSTART), "--config", str(config), "--seed", "3")
    assert cli.model.spec == ModelSpec(**model)
    assert cli.model.adapter.tokenizer.tokenize("a man sews") == ["a", "man", "[UNK]"]


def test_the_model_spec_is_read_from_flags_one_field_at_a_time():
    cli = cli_of(
        "--config", str(QUICKSTART), "--model.init_args.model.name", "albef", "--model.init_args.model.tiny_sizes",
        "{image_size: 32, patch_size: 8}", "--seed", "3",
    )  # fmt: skip
    assert cli.model.spec == ModelSpec("albef", tiny=True, tiny_sizes=TINY, seed=3)  # tiny: the config's


def test_a_field_is_set_to_null_with_the_group_as_a_mapping(tmp_path):
    """``--model.init_args.model.checkpoint null`` reads as the string "None" (jsonargparse 4.53); the mapping form
    gives null, and the fields it leaves out keep the config's values."""
    config = tmp_path / "pretrained.yaml"
    config.write_text(yaml.safe_dump({"model": {"init_args": {"model": {"checkpoint": "runs/x/model"}}}}))
    cli = cli_of(
        "--config", str(QUICKSTART), "--config", str(config), "--model.init_args.model.tiny", "false",
        "--model.init_args.model", "{tiny: true, checkpoint: null}", "--seed", "5",
    )  # fmt: skip
    assert cli.model.spec == ModelSpec("clip", tiny=True, seed=5)


def test_a_tiny_model_from_a_config_that_names_a_checkpoint(tmp_path):
    """The retrieval configs name ALBEF's checkpoint: a newcomer's tiny trial sets it to null, in the mapping form
    or with the flag (which jsonargparse reads as the string "None")."""
    retrieval = ROOT / "configs" / "experiment" / "retrieval_coco.yaml"
    for null in (["--model.init_args.model", "{name: albef, checkpoint: null, tiny: true}"],
                 ["--model.init_args.model.tiny", "true", "--model.init_args.model.checkpoint", "null"]):  # fmt: skip
        (tmp_path / "dataset_coco.json").write_text('{"images": []}')  # read when the run sets up, not here
        data = ["--data.init_args.annotations", str(tmp_path / "dataset_coco.json"), "--data.init_args.image_root", str(tmp_path)]  # fmt: skip
        cli = make_cli(["--config", str(retrieval), "--config", str(CPU), *null, *data], run=False)
        assert (cli.model.spec.name, cli.model.spec.checkpoint, cli.model.spec.tiny) == ("albef", None, True)


def test_the_run_seed_is_the_model_seed_and_a_spec_seed_apart_from_it_is_refused():
    """``vlbias fit`` has one seed: the spec's follows it (a tiny model's weights, the MI estimator)."""
    cli = cli_of("--config", str(QUICKSTART), "--seed", "7")
    assert cli.model.spec.seed == 7 and cli.model.hparams["model"]["seed"] == 7
    with pytest.raises(ConfigError, match=r"`model.init_args.model.seed` \(5\) is set from the run's `seed` \(7\)"):
        cli_of("--config", str(QUICKSTART), "--seed", "7", "--model.init_args.model.seed", "5")


def test_the_specs_own_checks_come_before_any_loading(tmp_path):
    with pytest.raises(ConfigError, match="`tiny_sizes` are the sizes of a tiny model; it needs `tiny: true`"):
        ModelSpec("clip", checkpoint="somewhere", tiny_sizes=TINY)
    with pytest.raises(CapabilityError, match="'masked-LM pre-training' needs capability 'fill_mask'"):
        ModelSpec("clip", checkpoint=str(tmp_path / "absent")).load(Capability.FILL_MASK, "masked-LM pre-training")


def _fit_one_step(module: LightningModule, tmp_path: Path) -> Path:
    trainer = L.Trainer(
        accelerator="cpu", max_epochs=1, limit_train_batches=1, limit_val_batches=0, num_sanity_val_steps=0,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=tmp_path,
    )  # fmt: skip
    trainer.fit(module, BiasWorldDataModule(n_train=8, eval_per_combination=1, image_size=32, batch_size=4))
    trainer.save_checkpoint(tmp_path / "module.ckpt")
    return tmp_path / "module.ckpt"


def _assert_loads_back(module: LightningModule, path: Path) -> LightningModule:
    hparams = torch.load(path, map_location="cpu", weights_only=True)["hyper_parameters"]  # plain values only
    assert hparams["model"] == module.hparams["model"]
    loaded = type(module).load_from_checkpoint(path, map_location="cpu", weights_only=True)
    assert loaded.spec == module.spec
    state, loaded_state = module.state_dict(), loaded.state_dict()
    assert state.keys() == loaded_state.keys() and all(torch.equal(state[k], loaded_state[k]) for k in state)
    return loaded


@pytest.mark.filterwarnings("ignore")
def test_a_cli_built_module_loads_back_with_its_optimizer(tmp_path):
    module = cli_of(
        "--config", str(QUICKSTART), "--model.init_args.model.tiny_sizes", "{image_size: 32}",
        "--model.init_args.optimizer.init_args.weight_decay", "0.05",
    ).model  # fmt: skip
    path = _fit_one_step(module, tmp_path)
    spec = torch.load(path, map_location="cpu", weights_only=True)["hyper_parameters"]["optimizer"]
    assert spec["class_path"] == "torch.optim.AdamW" and spec["init_args"]["weight_decay"] == 0.05
    optimizer = _assert_loads_back(module, path).configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    assert (optimizer.defaults["lr"], optimizer.defaults["weight_decay"]) == (0.003, 0.05)


@pytest.mark.filterwarnings("ignore")
def test_a_python_built_module_loads_back_with_its_settings(tmp_path):
    method = FairVLPMethod("fairvlp_l", alpha=0.25, counterfactual_targets="swapped")
    module = FairVLP(method=method, model=ModelSpec("albef", tiny=True, tiny_sizes=TINY), groups=["man", "woman"])
    assert "optimizer" not in module.hparams  # a callable has no serialisable form
    loaded = _assert_loads_back(module, _fit_one_step(module, tmp_path))
    assert loaded.method == method.with_defaults() == module.method
    assert loaded.hparams["groups"] == ["man", "woman"]


def test_the_default_spec_is_a_tiny_model_of_the_modules_family():
    assert ContrastivePretraining().spec == ModelSpec("clip", tiny=True)
    assert FairVLP(groups=["man", "woman"]).spec == ModelSpec("albef", tiny=True)

"""The model registry: names, capability listing, ``load`` and the model configs."""

import json
from pathlib import Path

import pytest
import torch
import yaml

from vlbias.commands.measure import parser as measure_parser
from vlbias.errors import CapabilityError, ConfigError
from vlbias.experiments.bench.models import bench_models
from vlbias.experiments.command_line import run
from vlbias.models.base import Capability
from vlbias.models.catalog import adapter_class, describe_models, list_models, models_with
from vlbias.models.registry import check_device, check_model_options, default_device, load

CONFIGS = Path(__file__).parents[2] / "configs" / "model"


def test_registered_names_are_sorted_and_include_the_reference_adapters():
    names = list_models()
    assert names == sorted(names)
    assert {"clip", "bert", "blip"} <= set(names)


def test_describe_models_is_json_with_each_models_capabilities():
    described = json.loads(json.dumps(describe_models()))
    assert [entry["name"] for entry in described] == list_models()
    by_name = {entry["name"]: entry["capabilities"] for entry in described}
    assert by_name["clip"] == ["embed"]
    assert by_name["blip"] == ["embed", "match"]
    assert by_name["bert"] == ["fill_mask", "token_states"]


def test_models_with_a_capability():
    assert {"clip", "blip"} <= set(models_with(Capability.EMBED))
    assert "bert" in models_with(Capability.FILL_MASK) and "clip" not in models_with(Capability.FILL_MASK)


def test_load_needs_exactly_one_of_checkpoint_and_tiny():
    with pytest.raises(ConfigError, match=r"either `checkpoint` \('openai/clip-vit-base-patch32'\) or `tiny=True`, not both \(a config that names a checkpoint trains a tiny model with --model.init_args.model '\{tiny: true, checkpoint: null\}'\)"):  # fmt: skip
        load("clip", checkpoint="openai/clip-vit-base-patch32", tiny=True)
    with pytest.raises(ConfigError, match="'clip' needs a `checkpoint`"):
        load("clip")


def test_load_puts_the_model_in_eval_mode_on_the_device_and_dtype():
    model = load("bert", tiny=True, device="cpu", dtype=torch.float64)
    assert not model.training and not any(module.training for module in model.modules())
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert model.device == torch.device("cpu")


@pytest.mark.parametrize("name", list_models())
def test_every_registered_adapter_implements_what_it_declares(name):
    """Each declared capability runs on a tiny instance and has a ``direct_call``; each
    undeclared one is refused with :class:`~vlbias.errors.CapabilityError`."""
    model = load(name, tiny=True, device="cpu")
    assert model.name == name and model.capabilities <= set(Capability)
    texts = [f"a {model.tokenizer.mask_token} is cooking.", "someone."]
    tokens = model.prepare_texts(texts)
    answers = Capability.ANSWER in model.capabilities  # reads images through its processor: test_chat_vlm.py
    pixels = None if model.text_only or answers else model.prepare_images(torch.rand(2, 3, 64, 64))
    with torch.no_grad():
        for capability in Capability:
            if capability is Capability.ANSWER and answers:
                with pytest.raises(CapabilityError, match="answers through score_options"):
                    model.run_capability(capability, pixels, tokens)
            elif capability in model.capabilities:
                model.run_capability(capability, pixels, tokens)
                model.direct_call(capability, pixels, tokens)
            else:
                with pytest.raises(CapabilityError, match=f"does not have capability '{capability.value}'"):
                    model.run_capability(capability, pixels, tokens)


@pytest.mark.parametrize("name", list_models())
def test_model_config_is_a_measure_config_and_builds(name):
    """``configs/model/<name>.yaml`` holds ``vlbias measure`` options (model, checkpoint, tiny)."""
    path = CONFIGS / f"{name}.yaml"
    config = yaml.safe_load(path.read_text())
    assert config["model"] == name and adapter_class(name).name == name
    assert config["tiny"] is False and config["checkpoint"]
    args = measure_parser().parse_args(["--config", str(path), "--suite", "mmbias", "--out", "unused"])
    assert (args.model, args.checkpoint, args.tiny) == (name, config["checkpoint"], False)
    model = load(name, tiny=True, device="cpu")
    assert model.name == name


def test_model_options_are_checked_against_the_adapters_builder():
    """``check_model_options`` is the door for model options (``load`` takes them checked): a name the adapter's
    ``tiny`` / ``from_pretrained`` does not take, or a value of the wrong type, is refused by name."""
    with pytest.raises(ConfigError, match=r"Model 'clip' does not take option\(s\) \['region_features'\] in tiny"):
        check_model_options("clip", {"region_features": "x.tsv"}, tiny=True)
    with pytest.raises(ConfigError, match=r"does not take option\(s\) \['hidden_size'\] in from_pretrained"):
        check_model_options("clip", {"hidden_size": 8}, tiny=False)
    with pytest.raises(ConfigError, match="model 'vilt' option `itm_checkpoint`"):
        check_model_options("vilt", {"itm_checkpoint": 3}, tiny=False)
    assert check_model_options("albef", {"image_size": "48"}, tiny=False) == {"image_size": 48}


def test_device_is_checked_at_the_door_and_load_takes_it_as_given():
    assert check_device(None) == default_device()
    assert check_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"Expected `device` to be one of this machine's devices \['cpu'"):
        check_device("potato")
    assert load("clip", tiny=True).device == default_device()


def test_bench_script_times_adapter_and_direct_call_for_each_capability(capsys):
    """``scripts/bench_models.py`` (:mod:`vlbias.experiments.bench.models`) runs end to end (a smoke test; its numbers
    are not checked)."""
    arguments = [
        "--models",
        "bert",
        "blip",
        "--batch_size",
        "2",
        "--repeats",
        "2",
        "--warmup",
        "0",
        "--json",
        "--threads",
        str(torch.get_num_threads()),
    ]  # leave this process's thread count alone
    assert run(bench_models, arguments) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["model"], row["capability"]) for row in rows] == [
        ("bert", "fill_mask"),
        ("bert", "token_states"),
        ("blip", "embed"),
        ("blip", "match"),
    ]
    assert all(row["adapter_items_per_s"] > 0 and row["direct_items_per_s"] > 0 for row in rows)

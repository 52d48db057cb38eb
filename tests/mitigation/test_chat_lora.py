"""LoRA on a tiny chat VLM through peft: the default target layers read from the model, only LoRA weights training,
refusals in one line, and the merged export loaded by a process that imports no vlbias giving the trained (LoRA,
unmerged) model's logits."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from torch.testing import assert_close
from transformers import AutoModelForImageTextToText

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.chat_lora import MERGE_FILE, LoraOptions, add_lora, default_target_modules, export_merged
from vlbias.models.families.chat_vlm import LlavaAdapter
from vlbias.models.registry import load

PROMPTS = ["Who is cooking?", "Is this person a doctor?"]
OPTIONS = [["the man", "a woman"], ["yes", "no"]]


def _images(n: int = 2) -> list[Image.Image]:
    return [
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (24, 20 + i, 3), dtype=np.uint8)) for i in range(n)
    ]


def _train(adapter, steps: int = 3) -> None:
    """A few Adam steps raising option 0's log-probability: the LoRA update becomes non-zero."""
    parameters = [weight for weight in adapter.model.parameters() if weight.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = -adapter.option_log_probs(_images(), PROMPTS, OPTIONS).log_prob[:, 0].mean()
        loss.backward()
        optimizer.step()


@pytest.mark.parametrize("name", ["llava", "idefics3", "qwen2_vl"])
def test_default_targets_are_the_language_models_attention_projections_read_from_the_model(name):
    model = load(name, tiny=True, device="cpu").model
    decoder = model.get_decoder()
    prefix = next(path for path, module in model.named_modules() if module is decoder)
    targets = default_target_modules(model)
    layers = model.config.get_text_config().num_hidden_layers
    expected = {f"{prefix}.layers.{i}.self_attn.{proj}" for i in range(layers) for proj in ("q_proj", "k_proj", "v_proj", "o_proj")}  # fmt: skip
    assert set(targets) == expected and len(targets) == len(expected)


def test_only_the_lora_weights_train_and_the_model_starts_unchanged():
    adapter = LlavaAdapter.tiny()
    before = adapter.score_options(_images(), PROMPTS, OPTIONS).log_prob
    add_lora(adapter, LoraOptions(rank=4, alpha=8))
    trainable = [name for name, weight in adapter.model.named_parameters() if weight.requires_grad]
    assert len(trainable) == 2 * 8 and all(".lora_A." in name or ".lora_B." in name for name in trainable)
    assert all("language_model" in name for name in trainable)
    assert_close(adapter.score_options(_images(), PROMPTS, OPTIONS).log_prob, before, rtol=0, atol=0)  # B = 0
    frozen = {name: weight.clone() for name, weight in adapter.model.named_parameters() if not weight.requires_grad}
    _train(adapter)
    after = adapter.score_options(_images(), PROMPTS, OPTIONS).log_prob
    assert (after[:, 0] > before[:, 0]).all()
    for name, weight in adapter.model.named_parameters():
        if not weight.requires_grad:
            assert torch.equal(weight, frozen[name]), name


def test_bad_lora_options_and_target_modules_the_model_lacks_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"LoRA option `rank` to be an integer v>0 but got 0"):
        LoraOptions(rank=0)
    with pytest.raises(ConfigError, match=r"LoRA option `dropout` to be a number v>=0.0 and v<1.0 but got 1.0"):
        LoraOptions(dropout=1.0)
    with pytest.raises(ConfigError, match=r"LoRA option `alpha` to be a number v>0"):
        LoraOptions(alpha=-1)
    with pytest.raises(ConfigError, match=r"`target_modules` to be module names \(or null\) but got \(\)"):
        LoraOptions(target_modules=())
    adapter = LlavaAdapter.tiny()
    options = LoraOptions(target_modules=("q_proj", "qkv", "self_attn.query"))
    with pytest.raises(ConfigError, match=r"LoRA target modules \['qkv', 'self_attn.query'\] are not layers of model "
                       r"'llava' .* named: down_proj, embed_tokens, fc1, fc2, gate_proj, k_proj, .*q_proj"):  # fmt: skip
        add_lora(adapter, options)
    assert not any("lora" in name for name, _ in adapter.model.named_parameters())  # refused before any change
    add_lora(adapter)
    with pytest.raises(InputError, match="has LoRA layers already"):
        add_lora(adapter)


def test_an_export_into_a_folder_of_other_files_is_refused_before_merging(tmp_path):
    adapter = LlavaAdapter.tiny()
    lora = add_lora(adapter)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "data.csv").write_text("a,b")
    with pytest.raises(ConfigError, match=r"holds what a merged LoRA export does not write \(data.csv\)"):
        export_merged(adapter, lora, tmp_path)
    assert any("lora_A" in name for name, _ in adapter.model.named_parameters())  # not merged
    with pytest.raises(InputError, match="does not wrap model 'llava'"):
        export_merged(LlavaAdapter.tiny(), lora, tmp_path / "other")


SUBPROCESS = """
import sys
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

folder, image, text, out = sys.argv[1:]
model = AutoModelForImageTextToText.from_pretrained(folder).eval()
processor = AutoProcessor.from_pretrained(folder)
inputs = processor(images=[[Image.open(image).convert("RGB")]], text=[text], return_tensors="pt")
with torch.no_grad():
    logits = model(**inputs).logits
assert not any(name.startswith(("vlbias", "peft")) for name in sys.modules), "vlbias or peft imported"
torch.save({"input_ids": inputs["input_ids"], "logits": logits}, out)
"""


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    """A tiny LLaVA with LoRA trained a few steps, exported merged: the folder, one fixed input (an image file and
    the rendered prompt), its processor inputs and the trained (LoRA, unmerged) model's logits."""
    folder = tmp_path_factory.mktemp("lora")
    adapter = LlavaAdapter.tiny()
    lora = add_lora(adapter, LoraOptions(rank=4, alpha=8))
    _train(adapter)
    _images(1)[0].save(folder / "image.png")
    inputs = adapter.prompt_inputs([Image.open(folder / "image.png")], [PROMPTS[0]])
    with torch.no_grad():
        trained = adapter.model(**inputs).logits  # through the LoRA layers, unmerged
        base = LlavaAdapter.tiny().model(**inputs).logits
    assert (trained - base).abs().max() > 1e-3  # the LoRA update changes the logits: the checks can fail
    export_merged(adapter, lora, folder / "merged")
    assert not any("lora" in name for name, _ in adapter.model.named_parameters())
    text = adapter.family.render(adapter.processor, PROMPTS[0])
    return {"folder": folder, "text": text, "inputs": inputs, "trained": trained}


def test_the_merged_export_loaded_by_transformers_gives_the_trained_lora_models_logits(merged):
    folder = merged["folder"] / "merged"
    assert json.loads((folder / MERGE_FILE).read_text())["lora"] == {
        "rank": 4,
        "alpha": 8,
        "dropout": 0.0,
        "target_modules": sorted(default_target_modules(LlavaAdapter.tiny().model)),
    }
    model = AutoModelForImageTextToText.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(**merged["inputs"]).logits
    assert_close(logits, merged["trained"], rtol=0, atol=1e-5)


@pytest.mark.slow  # a new Python importing transformers (~12 s on 2 busy cores)
def test_the_merged_export_loaded_without_vlbias_gives_the_trained_lora_models_logits(merged):
    folder = merged["folder"]
    run = [str(folder / "merged"), str(folder / "image.png"), merged["text"], str(folder / "logits.pt")]
    done = subprocess.run([sys.executable, "-c", SUBPROCESS, *run], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = torch.load(folder / "logits.pt")
    assert torch.equal(loaded["input_ids"], merged["inputs"]["input_ids"])
    assert_close(loaded["logits"], merged["trained"], rtol=0, atol=1e-5)

"""The adapter protocol's shared machinery: capability refusal, strict loading, image and text
input checks, and the measurement context."""

import pytest
import torch
from PIL import Image
from safetensors.torch import load_file, save_file

from vlbias.data.images import load_image
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.models.base import Capability, require_capability
from vlbias.models.catalog import list_models
from vlbias.models.inference import measuring
from vlbias.models.registry import load


@pytest.fixture(scope="module")
def clip():
    return load("clip", tiny=True, device="cpu")


def test_require_capability_names_suite_model_capability_and_models_that_have_it():
    bert = load("bert", tiny=True, device="cpu")
    with pytest.raises(
        CapabilityError,
        match=r"Suite 'mmbias' needs capability 'embed', which model 'bert' lacks "
        r"\(it has: fill_mask, token_states\)\. Models with 'embed': .*blip.*clip",
    ):
        require_capability(bert, Capability.EMBED, "mmbias")
    require_capability(bert, Capability.FILL_MASK, "counterbias")  # has it: no error


def test_unknown_model_name_lists_the_known_names():
    with pytest.raises(ConfigError, match=r"Unknown model 'clip-vit'; expected one of: " + ", ".join(list_models())):
        load("clip-vit", tiny=True)


def test_checkpoint_with_a_renamed_key_lists_missing_and_unexpected_keys(clip, tmp_path):
    clip.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    old = "text_model.final_layer_norm.weight"
    weights["text_model.final_layer_norm.scale"] = weights.pop(old)
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(InputError) as error:
        load("clip", checkpoint=tmp_path, device="cpu")
    message = str(error.value)
    assert "does not match model 'clip'" in message and str(tmp_path) in message
    assert f"1 missing key(s): {old}" in message
    assert "1 unexpected key(s): text_model.final_layer_norm.scale" in message


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n but not really a png"])
def test_corrupt_image_file_is_named(clip, tmp_path, content):
    path = tmp_path / "broken.png"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"Image file '.*broken\.png' could not be decoded"):
        clip.prepare_images([path])


def test_missing_image_file_is_named(tmp_path):
    with pytest.raises(InputError, match=r"Image file '.*absent\.jpg' does not exist"):
        load_image(tmp_path / "absent.jpg")


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "CMYK"])
def test_non_rgb_image_is_converted_with_a_warning(clip, tmp_path, mode):
    path = tmp_path / f"picture_{mode}.{'jpg' if mode == 'CMYK' else 'png'}"
    Image.new("RGB", (40, 30), (200, 100, 50)).convert(mode).save(path)
    with pytest.warns(UserWarning, match=rf"picture_{mode}.*has mode '{mode}'; converted to RGB"):
        pixels = clip.prepare_images([path])
    assert pixels.shape == (1, 3, 64, 64)
    with pytest.warns(UserWarning, match="<in-memory image>"):
        assert load_image(Image.open(path)).mode == "RGB"


def test_over_long_text_is_truncated_with_a_warning_saying_by_how_much(clip):
    text = " ".join(["a man is cooking"] * 10)  # 40 words + [CLS] + [SEP] = 42 tokens
    limit = clip.max_text_length
    expected = rf"1 text\(s\) exceed clip's maximum of {limit} tokens.*by {42 - limit} tokens"
    with pytest.warns(UserWarning, match=expected):
        tokens = clip.prepare_texts([text, "a man."])
    assert tokens["input_ids"].shape == (2, limit)
    assert tokens["input_ids"][0, -1] == clip.tokenizer.sep_token_id  # truncation keeps the end token


def test_measuring_on_cpu_is_float32_without_gradients():
    layer = torch.nn.Linear(4, 2)
    with measuring("cpu"):
        out = layer(torch.ones(3, 4))
    assert out.dtype == torch.float32 and not out.requires_grad


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_measuring_on_cuda_autocasts_to_bfloat16():
    layer = torch.nn.Linear(4, 2).cuda()
    with measuring("cuda"):
        out = layer(torch.ones(3, 4, device="cuda"))
    assert out.dtype == torch.bfloat16 and not out.requires_grad


@pytest.mark.parametrize("where", ["absent_dir", "empty_dir"])
def test_checkpoint_that_cannot_be_found_is_named(tmp_path, where):
    checkpoint = tmp_path / where
    if where == "empty_dir":
        checkpoint.mkdir()
    expected = "does not exist" if where == "absent_dir" else r"has no config\.json"
    with pytest.raises(InputError, match=rf"Checkpoint '.*{where}' for model 'clip' {expected}"):
        load("clip", checkpoint=checkpoint, device="cpu")

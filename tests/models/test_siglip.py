"""SigLIP and SigLIP 2 adapters: the protocol checks are in test_protocol.py; here the sigmoid pair score, the text
padded to full length, each family's preprocessing, and loading (a saved directory, another family's, a hub id
offline)."""

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import Siglip2ImageProcessor

from vlbias.errors import InputError
from vlbias.models.base import Capability
from vlbias.models.families.siglip2 import PatchImages
from vlbias.models.registry import load

FAMILIES = ("siglip", "siglip2")
TEXTS = ["a man is cooking.", "the woman who is driving.", "someone."]


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return load(request.param, tiny=True, device="cpu")


def test_match_is_the_sigmoid_log_odds_of_the_scaled_cosine_plus_bias(model):
    """MATCH is ``s = exp(t) cos(v, t) + b`` of the normalised EMBED outputs (Zhai et al., 2023, Eq. 1 and
    Algorithm 1), the diagonal of the model's ``logits_per_image``; ``sigmoid(s)`` is the model's match probability."""
    pixels = model.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(1)))
    tokens = model.prepare_texts(TEXTS)
    with torch.no_grad():
        model.model.logit_scale.fill_(2.0)  # a scale and a bias other than the initial 0, so that a dropped one shows
        model.model.logit_bias.fill_(-3.0)
        images, texts = model.embed_images(pixels), model.embed_texts(tokens)
        scores = model.match_logits(pixels, tokens)
        forward = model.direct_call(Capability.MATCH, pixels, tokens)
    torch.testing.assert_close(images.norm(dim=-1), torch.ones(3))
    torch.testing.assert_close(scores, model.logit_scale.exp() * (images * texts).sum(dim=-1) + model.logit_bias)
    torch.testing.assert_close(scores, forward)
    torch.testing.assert_close(scores, torch.e**2 * (images * texts).sum(dim=-1) - 3.0)


def test_texts_are_padded_to_the_full_length_without_a_mask(model):
    """SigLIP reads every text padded to its full length (here 32) with no attention mask, so a text's embedding does
    not depend on its batch; over-long texts are cut with a warning."""
    tokens = model.prepare_texts(TEXTS)
    assert list(tokens) == ["input_ids"] and tokens["input_ids"].shape == (3, model.max_text_length) == (3, 32)
    assert (tokens["input_ids"][:, -1] == model.tokenizer.pad_token_id).all()
    with pytest.warns(
        UserWarning, match=f"exceed {model.name}'s maximum of 32 tokens and were truncated, the longest by 10"
    ):
        assert model.prepare_texts([" ".join(["cooking"] * 40)])["input_ids"].shape == (1, 32)


def test_siglip_images_are_squashed_to_the_square_and_normalised_with_half(tmp_path):
    """SigLIP's processor: resized straight to the square (no crop), mean and std 0.5; a directory without a
    ``preprocessor_config.json`` (a hub id's) takes the same."""
    model = load("siglip", tiny=True, device="cpu")
    grey = torch.full((1, 3, 40, 80), 0.75)
    torch.testing.assert_close(model.prepare_images(grey), torch.full((1, 3, 32, 32), 0.5))
    halves = torch.cat([torch.zeros(1, 3, 32, 32), torch.ones(1, 3, 32, 32)], dim=-1)  # left black, right white
    pixels = model.prepare_images(halves)
    assert pixels[0, :, :, 0].eq(-1).all() and pixels[0, :, :, -1].eq(1).all()  # both halves kept: not cropped
    model.save_pretrained(tmp_path)
    (tmp_path / "preprocessor_config.json").unlink()
    restored = load("siglip", checkpoint=tmp_path, device="cpu")
    assert (restored.transform.mean, restored.transform.std) == ((0.5,) * 3, (0.5,) * 3)
    assert restored.transform.image_size == 32 and restored.transform.center_crop is False


def test_siglip2_reads_images_at_their_aspect_ratio_as_its_processor_does():
    """SigLIP 2 NaFlex: each image is patches of its own aspect ratio, at most ``max_num_patches`` (16 for the tiny
    model), padded to one count; the same as ``Siglip2ImageProcessor`` on a PIL image."""
    model = load("siglip2", tiny=True, device="cpu")
    wide = Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 96, 3), dtype=np.uint8))
    square = Image.fromarray(np.random.default_rng(1).integers(0, 255, (48, 48, 3), dtype=np.uint8))
    batch = model.prepare_images([wide, square])
    assert batch.spatial_shapes.tolist() == [[2, 6], [4, 4]]
    assert batch.pixel_attention_mask.sum(dim=1).tolist() == [12, 16] and batch.pixel_values.shape == (2, 16, 192)
    processor = Siglip2ImageProcessor(patch_size=8, max_num_patches=16, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    theirs = processor(images=[wide, square], return_tensors="pt")
    torch.testing.assert_close(batch.pixel_values, theirs["pixel_values"], rtol=0, atol=1e-5)
    assert torch.equal(batch.spatial_shapes, theirs["spatial_shapes"])
    picked = batch.index_select(0, torch.tensor([1]))
    assert isinstance(picked, PatchImages) and picked.spatial_shapes.tolist() == [[4, 4]] and len(batch[:1]) == 1
    with pytest.raises(InputError, match="select images \\(dim 0\\) only but got dim=1"):
        batch.index_select(1, torch.tensor([0]))


@pytest.mark.parametrize("name", FAMILIES)
def test_a_hub_id_offline_is_refused_in_one_line(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    checkpoint = "google/siglip-base-patch16-224"
    with pytest.raises(InputError) as error:
        load(name, checkpoint=checkpoint)
    message = str(error.value)
    assert f"Checkpoint {checkpoint!r} for model {name!r} is neither a local directory" in message
    assert "hub id this machine can reach" in message and "\n" not in message


def test_another_familys_directory_is_refused_by_family(tmp_path):
    load("siglip", tiny=True, device="cpu").save_pretrained(tmp_path)
    with pytest.raises(InputError, match="is a 'siglip' model .* but model 'siglip2' loads model_type 'siglip2'"):
        load("siglip2", checkpoint=tmp_path)


def test_a_truncated_weights_file_is_named_before_transformers_reads_it(tmp_path):
    """A ``model.safetensors`` cut short (a copy or a full disk) is one line naming it, as any saved directory's."""
    load("siglip", tiny=True, device="cpu").save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(InputError, match=r"model\.safetensors' is not a whole safetensors file \(.*\); expected the"):
        load("siglip", checkpoint=tmp_path, device="cpu")

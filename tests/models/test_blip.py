"""BLIP adapter: the protocol checks are in test_protocol.py; here BLIP specifics."""

import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from vlbias.errors import CapabilityError
from vlbias.models.preprocess import CLIP_MEAN, CLIP_STD
from vlbias.models.registry import load

NAME = "blip"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


@pytest.fixture(scope="module")
def batch(model):
    pixels = model.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(1)))
    tokens = model.prepare_texts(["a man is cooking.", "a woman who is driving.", "someone."])
    return pixels, tokens


def test_match_logit_is_log_odds_of_itm_match_class(model, batch):
    pixels, tokens = batch
    with torch.no_grad():
        logits = model.match_logits(pixels, tokens)
        itm = model.model(pixel_values=pixels, input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"])
        itm = itm.itm_score
    torch.testing.assert_close(logits.sigmoid(), itm.softmax(dim=-1)[:, 1])


def test_embedding_similarity_is_blip_itc_score(model, batch):
    """The dot products of the adapter's embeddings are the model's ``use_itm_head=False`` matrix."""
    pixels, tokens = batch
    with torch.no_grad():
        ours = model.embed_images(pixels) @ model.embed_texts(tokens).T
        itc = model.model(
            pixel_values=pixels,
            input_ids=tokens["input_ids"],
            attention_mask=tokens["attention_mask"],
            use_itm_head=False,
        ).itm_score
    torch.testing.assert_close(ours, itc)


def test_no_image_is_the_mean_colour_and_is_accepted(model, batch):
    _, tokens = batch
    blank = model.no_image(3)
    assert blank.shape == (3, 3, 32, 32) and not blank.any()
    grey = torch.tensor(CLIP_MEAN)[None, :, None, None].expand(3, 3, 40, 40)
    torch.testing.assert_close(model.prepare_images(grey), blank, rtol=0, atol=1e-6)
    assert model.match_logits(blank, tokens).shape == (3,)


def test_images_are_resized_to_a_square_without_cropping(model):
    wide = torch.rand(1, 3, 32, 96, generator=torch.Generator().manual_seed(3))
    expected = TF.normalize(
        TF.resize(wide, [32, 32], interpolation=TF.InterpolationMode.BICUBIC, antialias=True).clamp(0, 1),
        list(CLIP_MEAN),
        list(CLIP_STD),
    )
    torch.testing.assert_close(model.prepare_images(wide), expected)


def test_fill_mask_is_refused_naming_models_that_have_it(model, batch):
    pixels, tokens = batch
    with pytest.raises(CapabilityError, match=r"'blip' does not have capability 'fill_mask'.*bert"):
        model.fill_mask_logits(pixels, tokens)

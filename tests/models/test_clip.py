"""CLIP adapter: the protocol checks are in test_protocol.py; here CLIP specifics."""

import pytest
import torch
from PIL import Image

from vlbias.errors import CapabilityError
from vlbias.models.registry import load

NAME = "clip"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


def test_similarity_equals_clip_logits(model):
    """Scaled cosine similarity of the adapter's embeddings is CLIPModel's ``logits_per_image``."""
    pixels = model.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(1)))
    tokens = model.prepare_texts(["a man is cooking.", "a woman is driving.", "someone."])
    with torch.no_grad():
        ours = model.logit_scale.exp() * model.embed_images(pixels) @ model.embed_texts(tokens).T
        theirs = model.model(pixel_values=pixels, **tokens).logits_per_image
    torch.testing.assert_close(ours, theirs)


def test_image_file_and_tensor_give_the_same_pixels(model, tmp_path):
    picture = (torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(2)) * 255).to(torch.uint8)
    path = tmp_path / "picture.png"
    Image.fromarray(picture.permute(1, 2, 0).numpy()).save(path)
    from_file = model.prepare_images([path])
    from_tensor = model.prepare_images(picture[None].float() / 255)
    torch.testing.assert_close(from_file, from_tensor)


def test_missing_capability_is_refused_naming_models_that_have_it(model):
    pixels = model.prepare_images(torch.rand(1, 3, 64, 64))
    with pytest.raises(CapabilityError, match=r"'clip' does not have capability 'match'.*blip"):
        model.match_logits(pixels, model.prepare_texts(["a man."]))

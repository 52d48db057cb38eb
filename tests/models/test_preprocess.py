"""ImageTransform: a batch tensor is resized at once, as each image alone would be, without touching the input."""

import torch
from PIL import Image
from torchvision.transforms.v2 import functional as TF

from vlbias.models.preprocess import ImageTransform


def test_a_batch_tensor_is_transformed_as_each_image_alone():
    transform = ImageTransform(image_size=16)
    images = torch.rand(3, 3, 40, 24, generator=torch.Generator().manual_seed(0))
    alone = torch.cat([transform(images[b : b + 1]) for b in range(3)])
    torch.testing.assert_close(transform(images), alone, rtol=0, atol=0)
    assert transform(images).shape == (3, 3, 16, 16)


def test_a_tensor_already_at_size_is_not_modified():
    transform = ImageTransform(image_size=8, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    images = torch.full((2, 3, 8, 8), 1.5)  # out of [0, 1]: clamped in the output only
    output = transform(images)
    assert torch.equal(images, torch.full((2, 3, 8, 8), 1.5)) and torch.equal(output, torch.ones(2, 3, 8, 8))


def test_pil_images_and_their_tensors_agree(tmp_path):
    transform = ImageTransform(image_size=16)
    pixels = (torch.rand(3, 20, 30, generator=torch.Generator().manual_seed(1)) * 255).byte()
    path = tmp_path / "image.png"
    Image.fromarray(pixels.permute(1, 2, 0).numpy()).save(path)
    from_file = transform([path])
    from_tensor = transform(TF.to_dtype(pixels, torch.float32, scale=True)[None])
    torch.testing.assert_close(from_file, from_tensor, rtol=0, atol=1e-6)


def test_a_uint8_batch_is_read_on_its_0_to_255_scale_and_other_integers_are_refused(tmp_path):
    """BiasWorld's pictures are uint8: read as 0-255, as the same picture from a file, never clamped to white."""
    import pytest

    from vlbias.errors import InputError

    transform = ImageTransform(image_size=16)
    pixels = (torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(2)) * 255).byte()
    torch.testing.assert_close(transform(pixels), transform(pixels.float() / 255.0), rtol=0, atol=0)
    with pytest.raises(InputError, match="floats in \\[0, 1\\] or of uint8 in \\[0, 255\\] but got dtype torch.int64"):
        transform(pixels.long())

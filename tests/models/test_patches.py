"""The patch projection as one matrix product (``vlbias.models.patches``): equal to the convolution
it replaces, in value and gradient, and a drop-in for it in the models that use it."""

import pytest
import torch
from torch import nn

from vlbias.models.patches import PatchProjection, project_patches, reads_patches
from vlbias.models.registry import load


@pytest.mark.parametrize("size", [(16, 16), (18, 21)], ids=["whole patches", "ragged edge"])
def test_projection_equals_the_convolution_in_value_and_gradient(size):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, kernel_size=4, stride=4)
    x = torch.rand(2, 3, *size, requires_grad=True)
    expected = conv(x)
    (expected_grad,) = torch.autograd.grad(expected.square().sum(), x)
    projected = project_patches(conv, x)
    (grad,) = torch.autograd.grad(projected.square().sum(), x)
    torch.testing.assert_close(projected, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "conv",
    [nn.Conv2d(3, 5, 4, stride=2), nn.Conv2d(3, 5, 4, stride=4, padding=1), nn.Conv2d(3, 6, 4, stride=4, groups=3)],
    ids=["overlapping", "padded", "grouped"],
)
def test_other_convolutions_are_left_to_torch(conv):
    x = torch.rand(1, 3, 12, 12)
    assert not reads_patches(conv)
    torch.testing.assert_close(project_patches(conv, x), conv(x), rtol=0, atol=0)


def test_replacing_keeps_the_parameters_and_state_dict_keys():
    conv = nn.Conv2d(3, 5, kernel_size=4, stride=4)
    projection = PatchProjection.replacing(conv)
    assert projection.weight is conv.weight and projection.bias is conv.bias
    assert projection.state_dict().keys() == conv.state_dict().keys()
    x = torch.rand(2, 3, 8, 8)
    torch.testing.assert_close(projection(x), conv(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("albef", "model.visual_encoder.patch_embed.proj"),
        ("flava", "model.flava.image_model.embeddings.patch_embeddings.projection"),
    ],
)
def test_attacked_image_encoders_project_patches_as_one_product(name, path):
    """ALBEF's and FLAVA's pixel paths, which the counterfactual-image attack differentiates, use it."""
    adapter = load(name, tiny=True, device="cpu")
    assert isinstance(adapter.get_submodule(path), PatchProjection)

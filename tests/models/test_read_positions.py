import pytest
import torch
from torch import nn
from transformers import FlavaTextConfig, ViltConfig
from transformers.models.flava.modeling_flava import FlavaLayer
from transformers.models.vilt.modeling_vilt import ViltLayer

from vlbias.models.base import at_positions
from vlbias.models.read_positions import additive_mask, encoder_at_positions

LAYERS = {
    "vilt": lambda: ViltLayer(ViltConfig(hidden_size=16, num_attention_heads=4, intermediate_size=24)),
    "flava": lambda: FlavaLayer(FlavaTextConfig(hidden_size=16, num_attention_heads=4, intermediate_size=24)),
}


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def full_encoder(layers, hidden, mask):
    for layer in layers:
        hidden = layer(hidden, additive_mask(mask, hidden.dtype))[0]
    return hidden


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_last_layer_at_positions_equals_the_full_layer_there(kind):
    """Layers with PyTorch's default initialisation (attention far from uniform, so a query taken
    from the wrong states shows), padded rows, repeated and padding positions; the gradient with
    respect to the input, which the attack follows, agrees too."""
    layers = nn.ModuleList([LAYERS[kind]() for _ in range(3)]).eval()
    hidden = torch.randn(3, 7, 16, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]])
    positions = torch.tensor([[2, 6], [3, 3], [0, 1]])
    expected = at_positions(full_encoder(layers, hidden, mask), positions)
    (grad_expected,) = torch.autograd.grad(expected.square().sum(), hidden)
    read = encoder_at_positions(layers, hidden, mask, positions)
    (grad_read,) = torch.autograd.grad(read.square().sum(), hidden)
    torch.testing.assert_close(read, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(grad_read, grad_expected, rtol=0, atol=1e-5)


def test_padding_is_not_attended_to():
    """Changing the states at masked positions changes nothing at the read positions."""
    layers = nn.ModuleList([LAYERS["vilt"]() for _ in range(2)]).eval()
    hidden, mask, positions = torch.randn(1, 5, 16), torch.tensor([[1, 1, 1, 0, 0]]), torch.tensor([[1]])
    changed = hidden.clone()
    changed[:, 3:] = torch.randn(1, 2, 16)
    read = encoder_at_positions(layers, hidden, mask, positions)
    torch.testing.assert_close(encoder_at_positions(layers, changed, mask, positions), read, rtol=0, atol=1e-6)
    assert not torch.allclose(encoder_at_positions(layers, changed, torch.ones(1, 5), positions), read, atol=1e-3)

import pytest
import torch
from torch import nn
from transformers import BertConfig, FlavaTextConfig, ViltConfig
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.flava.modeling_flava import FlavaLayer
from transformers.models.vilt.modeling_vilt import ViltLayer

from vlbias.models.base import at_positions
from vlbias.models.read_positions import additive_mask, attention_at, encoder_at_positions

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


@pytest.mark.parametrize("read", [1, 2, 6], ids=["one-folded", "two-folded", "six-projected"])
def test_attention_at_equals_the_modules_own_attention_there(read):
    """Both ways of computing attention at read positions (the key and value projections folded into
    the queries while that is cheaper, all states projected otherwise: K/N + K*heads/H < 1 with
    N = 7, H = 16, 4 heads folds K = 1 and 2, not 6) give BERT's own self-attention context there,
    and every projection parameter, the key bias included, gets its gradient."""
    config = BertConfig(hidden_size=16, num_attention_heads=4, attn_implementation="eager")
    attention = BertSelfAttention(config).eval()
    nn.init.normal_(attention.key.bias)
    nn.init.normal_(attention.value.bias)
    hidden = torch.randn(3, 7, 16)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]])
    positions = torch.tensor([[6, 0, 2, 3, 4, 5], [3, 3, 1, 0, 2, 1], [0, 1, 1, 0, 1, 0]])[:, :read]
    bias = additive_mask(mask, hidden.dtype)
    full = attention(hidden, attention_mask=bias)[0]  # (B, N, H)
    expected = at_positions(full, positions)
    expected_grads = torch.autograd.grad(expected.square().sum(), list(attention.parameters()))
    context = attention_at(attention, at_positions(hidden, positions), hidden, bias)
    grads = torch.autograd.grad(context.square().sum(), list(attention.parameters()))
    torch.testing.assert_close(context, expected, rtol=0, atol=1e-5)
    for name, grad, grad_expected in zip(dict(attention.named_parameters()), grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, grad_expected, rtol=1e-4, atol=1e-4, msg=name)

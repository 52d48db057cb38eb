"""Transformer encoders whose last layer computes only the positions that are read.

Masked-word scores read a handful of text positions (the masks) of the last layer. Every position
of the layers before feeds them through attention, but in the last layer only the read positions'
queries, attention outputs and MLPs matter: keys and values still come from every position (their
projections folded into the few queries where that is cheaper, :func:`attention_at`), the rest is
computed for the ``K`` read positions instead of all ``N``. The states are those of the
full layer at the read positions (equal up to float rounding); for a two-layer model this is most
of the second layer's work, in the counterfactual-image attack's forward and backward passes as well.

:func:`encoder_at_positions` runs ViT-style blocks (``ViltLayer``, ``FlavaLayer``):
``x + attention(layernorm_before(x))``, then ``h + output(intermediate(layernorm_after(h)))``, with
``attention.attention`` holding the ``query``/``key``/``value`` projections and ``attention.output``
the output projection. ALBEF's post-LayerNorm fusion layers use :func:`attention_at` the same way
(:class:`~vlbias.models.families.albef_modeling.ALBEFLayer`).

Example:
    >>> import torch
    >>> from transformers import ViltConfig
    >>> from transformers.models.vilt.modeling_vilt import ViltLayer
    >>> config = ViltConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16)
    >>> layers = nn.ModuleList([ViltLayer(config) for _ in range(2)]).eval()
    >>> hidden, mask, positions = torch.randn(3, 5, 8), torch.ones(3, 5), torch.tensor([[1], [4], [0]])
    >>> full = layers[1](layers[0](hidden, additive_mask(mask, hidden.dtype))[0])[0]
    >>> read = encoder_at_positions(layers, hidden, mask, positions)
    >>> torch.allclose(read, at_positions(full, positions), atol=1e-6)
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vlbias.models.base import at_positions


def additive_mask(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A ``(B, N)`` attention mask (1 attended, 0 not) as the ``(B, 1, 1, N)`` bias that eager
    attention adds to its scores: 0 where attended, the most negative ``dtype`` value elsewhere."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def split_heads(hidden: Tensor, head_size: int) -> Tensor:
    """``(B, L, H)`` states as ``(B, H / head_size, L, head_size)`` attention heads (a view)."""
    return hidden.view(*hidden.shape[:2], -1, head_size).transpose(1, 2)


def attention_at(attention: nn.Module, queries: Tensor, states: Tensor, bias: Tensor) -> Tensor:
    r"""Multi-head attention of ``queries`` ``(B, K, H)`` over ``states`` ``(B, N, H)`` with the
    ``query``/``key``/``value`` projections of ``attention`` (a ViLT, FLAVA or BERT self-attention) and
    the additive mask ``bias`` ``(B, 1, 1, N)``: the context ``(B, K, H)``, before the output projection.

    With few read positions the key and value projections are folded into the queries instead of
    being applied to all ``N`` states. For head :math:`h` (projections :math:`W^K_h, b^K_h, W^V_h,
    b^V_h`, query :math:`q_{hk}` of read position :math:`k`, head size :math:`d`):

    .. math::
        s_{hkn} = \frac{(W^{K\top}_h q_{hk}) \cdot x_n + q_{hk} \cdot b^K_h}{\sqrt{d}}, \qquad
        c_{hk} = W^V_h \Big(\sum_n p_{hkn} x_n\Big) + \Big(\sum_n p_{hkn}\Big) b^V_h,
        \qquad p_{hk\cdot} = \operatorname{softmax}_n(s_{hk\cdot} + \text{bias})

    the same scores and context as projecting every state (up to float rounding, and with dropout on
    :math:`p`), at :math:`2KH^2 + 2K\,\text{heads}\,NH` multiply-adds instead of :math:`2NH^2` for the
    projections of the states. Used when that is fewer: :math:`K/N + K\,\text{heads}/H < 1`, e.g. one
    read position of a base-size layer (``H`` = 768, 12 heads) at any ``N`` above one.
    """
    size = attention.attention_head_size
    rows, read, width = queries.shape
    heads, length = width // size, states.shape[1]
    query = split_heads(attention.query(queries), size)  # (B, heads, K, d)
    if read * width + read * heads * length >= length * width:
        context = F.scaled_dot_product_attention(
            query,
            split_heads(attention.key(states), size),
            split_heads(attention.value(states), size),
            attn_mask=bias.to(query.dtype),
            dropout_p=attention.dropout.p if attention.training else 0.0,
        )
        return context.transpose(1, 2).flatten(2)
    query = query * size**-0.5
    key_weight = attention.key.weight.view(heads, size, width)  # rows h*d .. h*d + d - 1: head h
    folded = torch.matmul(query.transpose(0, 1).reshape(heads, rows * read, size), key_weight)  # (heads, B*K, H)
    folded = folded.view(heads, rows, read, width).transpose(0, 1).reshape(rows, heads * read, width)
    scores = torch.bmm(folded, states.transpose(1, 2)).view(rows, heads, read, length)
    scores = scores + (query * attention.key.bias.view(heads, 1, size)).sum(-1, keepdim=True) + bias.to(scores.dtype)
    weights = F.dropout(scores.softmax(-1), attention.dropout.p, attention.training)  # (B, heads, K, N)
    pooled = torch.bmm(weights.view(rows, heads * read, length), states)  # (B, heads * K, H)
    pooled = pooled.view(rows, heads, read, width).transpose(0, 1).reshape(heads, rows * read, width)
    context = torch.matmul(pooled, attention.value.weight.view(heads, size, width).transpose(1, 2))  # (heads, B*K, d)
    context = context.view(heads, rows, read, size).permute(1, 0, 2, 3)  # (B, heads, K, d)
    context = context + weights.sum(-1, keepdim=True) * attention.value.bias.view(heads, 1, size)
    return context.transpose(1, 2).flatten(2)


def layer_at_positions(layer: nn.Module, hidden: Tensor, bias: Tensor, positions: Tensor) -> Tensor:
    """One pre-LayerNorm layer's output at ``(B, K)`` positions of ``hidden`` ``(B, N, H)``, with the
    additive attention mask ``bias`` ``(B, 1, 1, N)``: ``(B, K, H)``."""
    normed = layer.layernorm_before(hidden)  # (B, N, H)
    queries = at_positions(normed, positions)  # (B, K, H)
    context = attention_at(layer.attention.attention, queries, normed, bias)
    states = layer.attention.output(context, queries) + at_positions(hidden, positions)
    return layer.output(layer.intermediate(layer.layernorm_after(states)), states)


def encoder_at_positions(layers: nn.ModuleList, hidden: Tensor, mask: Tensor, positions: Tensor) -> Tensor:
    """``layers`` over ``hidden`` ``(B, N, H)`` with attention mask ``(B, N)``, every layer but the
    last at all positions and the last at ``positions`` ``(B, K)`` alone: ``(B, K, H)``."""
    bias = additive_mask(mask, hidden.dtype)
    for layer in layers[:-1]:
        hidden = layer(hidden, bias)[0]
    return layer_at_positions(layers[-1], hidden, bias, positions)

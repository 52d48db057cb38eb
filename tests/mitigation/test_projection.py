"""Prompt projection (Chuang et al., 2023): the bias directions are removed, the projection is idempotent."""

import pytest
import torch

from vlbias.errors import InputError
from vlbias.mitigation import apply_projection, orthogonal_projection

F64 = torch.float64


def test_projection_removes_the_bias_directions_and_is_idempotent():
    g = torch.Generator().manual_seed(0)
    bias = torch.randn(3, 32, generator=g, dtype=F64)
    p = orthogonal_projection(bias)
    torch.testing.assert_close(p @ p, p, rtol=0, atol=1e-12)
    torch.testing.assert_close(p, p.T, rtol=0, atol=1e-12)
    assert int(torch.linalg.matrix_rank(p)) == 32 - 3
    texts = torch.randn(10, 32, generator=g, dtype=F64)
    debiased = apply_projection(texts, p)
    torch.testing.assert_close(debiased.norm(dim=1), torch.ones(10, dtype=F64))
    assert (debiased @ bias.T).abs().max() < 1e-12
    torch.testing.assert_close(apply_projection(debiased, p), debiased, rtol=0, atol=1e-12)


def test_equals_the_normal_equations_and_tolerates_dependent_prompts():
    """P = I - V (V^T V)^-1 V^T for independent prompts; a repeated prompt (V^T V singular) changes nothing."""
    g = torch.Generator().manual_seed(1)
    bias = torch.randn(2, 16, generator=g, dtype=F64)
    v = bias.T
    expected = torch.eye(16, dtype=F64) - v @ torch.linalg.inv(v.T @ v) @ v.T
    torch.testing.assert_close(orthogonal_projection(bias), expected, rtol=0, atol=1e-12)
    repeated = torch.cat([bias, bias[:1] * 2])
    torch.testing.assert_close(orthogonal_projection(repeated), expected, rtol=0, atol=1e-12)


def test_bad_inputs_are_refused():
    bias = torch.eye(4)[:2]
    with pytest.raises(InputError, match="fewer bias prompts than dimensions but got 4 prompts of dimension 4"):
        orthogonal_projection(torch.eye(4))
    with pytest.raises(InputError, match=r"\(4, 4\) projection for 4-dimensional embeddings but got \(3, 3\)"):
        apply_projection(torch.ones(2, 4), torch.eye(3))
    with pytest.raises(InputError, match=r"Rows \[1\] of `embeddings` lie in the bias span"):
        apply_projection(torch.tensor([[1.0, 0.0, 1.0, 0.0], [2.0, 3.0, 0.0, 0.0]]), orthogonal_projection(bias))

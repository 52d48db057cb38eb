r"""Prompt projection: remove bias-prompt directions from text embeddings (Chuang et al., 2023).

"Debiasing Vision-Language Models via Biased Prompts" (Chuang, Jampani, Li, Torralba & Jegelka, 2023,
Sec. 3.1, Eq. 3-4) embeds prompts that name the spurious attribute (e.g. "a photo of a male",
"a photo of a female") as the columns of :math:`V \in \mathbb{R}^{D \times k}` and projects every text
embedding onto the orthogonal complement of their span:

.. math::
    P = I - V (V^\top V)^{-1} V^\top = I - V V^{+}, \qquad z' = \frac{P z}{|P z|}

This module implements that plain orthogonal projection, *without* their calibration matrix
(:math:`P^* = P (I + \lambda \sum_{(i, j)} (z_i - z_j)(z_i - z_j)^\top)^{-1}`, Eq. 6, which also equalises
paired prompts). :math:`V V^{+}` is computed from the thin SVD :math:`V = U S W^\top` as
:math:`U_r U_r^\top` over the singular values above ``rtol`` times the largest: the pseudo-inverse form,
which stays exact when prompts are (nearly) linearly dependent, where :math:`(V^\top V)^{-1}` is
ill-conditioned. Image embeddings are left as they are (the method debiases the text side of zero-shot
classifiers).

Example:
    >>> bias = torch.tensor([[1.0, 1.0, 0.0]])  # one bias prompt direction
    >>> p = orthogonal_projection(bias)
    >>> apply_projection(torch.tensor([[1.0, 0.0, 1.0]]), p)  # (0.5, -0.5, 1) / |.|
    tensor([[ 0.4082, -0.4082,  0.8165]])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_embeddings


def orthogonal_projection(bias_embeddings: Tensor, rtol: float | None = None) -> Tensor:
    r""":math:`P = I - V V^{+}`, the projection onto the orthogonal complement of the bias prompts' span.

    Args:
        bias_embeddings: ``(k, D)`` embeddings of the bias prompts, one per row (:math:`V^\top`); ``k < D``.
        rtol: singular values below ``rtol`` times the largest count as zero (default: ``D`` times the
            dtype's machine epsilon, as ``torch.linalg.pinv``).

    Returns:
        ``(D, D)`` symmetric, idempotent projection in the embeddings' dtype.
    """
    bias = check_embeddings("bias_embeddings", bias_embeddings)
    k, dim = bias.shape
    if k >= dim:
        raise InputError(f"Expected fewer bias prompts than dimensions but got {k} prompts of dimension {dim}")
    if rtol is None:
        rtol = dim * torch.finfo(bias.dtype).eps
    elif not 0 <= rtol < 1:
        raise ConfigError(f"Expected `rtol` in [0, 1) but got {rtol!r}")
    u, s, _ = torch.linalg.svd(bias.T, full_matrices=False)  # V = U S W^T, U (D, k)
    basis = u[:, s > rtol * s.max()]
    return torch.eye(dim, dtype=bias.dtype, device=bias.device) - basis @ basis.T


def apply_projection(embeddings: Tensor, projection: Tensor) -> Tensor:
    """``embeddings`` ``(n, D)`` projected by ``projection`` ``(D, D)`` (:func:`orthogonal_projection`)
    and re-normalised to unit length. A row that lies in the removed span has no direction left and is refused."""
    embeddings = check_embeddings("embeddings", embeddings)
    dim = embeddings.shape[1]
    if projection.shape != (dim, dim):
        raise InputError(
            f"Expected a ({dim}, {dim}) projection for {dim}-dimensional embeddings but got {tuple(projection.shape)}"
        )
    projected = embeddings @ projection.to(embeddings.dtype).T
    ratio = projected.norm(dim=1) / embeddings.norm(dim=1)
    lost = (ratio < torch.finfo(embeddings.dtype).eps ** 0.5).nonzero().squeeze(1)
    if lost.numel():
        raise InputError(f"Rows {lost.tolist()} of `embeddings` lie in the bias span: nothing is left after projection")
    return F.normalize(projected, dim=1)

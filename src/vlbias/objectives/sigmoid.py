r"""The pairwise sigmoid loss of SigLIP (Zhai, Mustafa, Kolesnikov & Beyer, 2023, "Sigmoid Loss for Language
Image Pre-Training", ICCV, Eq. 1 and Algorithm 1).

Every image–text pair of the batch is a binary classification of its own: with normalised embeddings
:math:`I_b, \tilde T_n`, the learnt scale :math:`t` (a log) and bias :math:`b`, and :math:`z_{bn} = 1` for a
matching pair and :math:`-1` otherwise,

.. math::
    \mathcal{L} = -\frac{1}{B} \sum_{b=1}^{B} \sum_{n=1}^{N} \log \sigma\!\left(z_{bn}
    \left(e^{t}\, I_b \cdot \tilde T_n + b\right)\right)

The texts :math:`\tilde T_n` are the batch's or, across processes, every rank's (gathered with their gradients),
and the :math:`B` images the local ones: each pair of the global batch is then counted once on the rank that holds
its image, and the mean of the ranks' losses is the loss of the global batch (the paper's chunked form). Unlike
the softmax of :mod:`vlbias.objectives.contrastive`, nothing is normalised over the batch, and a caption that
describes several images of the batch is simply a positive of each (:math:`z = 1` wherever the positive mask is).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import InputError


def sigmoid_loss(
    image_embeddings: Tensor,
    gallery_texts: Tensor,
    logit_scale: Tensor,
    logit_bias: Tensor,
    positives: Tensor,
) -> Tensor:
    """SigLIP's loss (module docstring) of ``B`` images against ``N`` texts.

    Args:
        image_embeddings: ``(B, D)`` normalised image embeddings.
        gallery_texts: ``(N, D)`` normalised text embeddings (the batch's, or every rank's).
        logit_scale: the log :math:`t` of the scale (a scalar tensor, learnable).
        logit_bias: the bias :math:`b` (a scalar or ``(1,)`` tensor, learnable).
        positives: ``(B, N)`` bool, pair ``(b, n)`` matches.

    Example:
        >>> eye = torch.eye(2)
        >>> loss = sigmoid_loss(eye, eye, torch.tensor(0.0), torch.tensor(0.0), torch.eye(2, dtype=torch.bool))
        >>> round(loss.item(), 4)  # per image: -log sigma(1) for its own text, -log sigma(-0) for the other
        1.0064
    """
    batch, gallery = image_embeddings.shape[0], gallery_texts.shape[0]
    if positives.shape != (batch, gallery) or positives.dtype != torch.bool:
        raise InputError(
            f"Expected argument `positives` to be a bool tensor of shape ({batch}, {gallery}) but got "
            f"{positives.dtype} {tuple(positives.shape)}"
        )
    logits = logit_scale.exp() * image_embeddings @ gallery_texts.T + logit_bias.reshape(())  # (B, N)
    signs = positives.to(logits.dtype) * 2 - 1  # z: +1 matching, -1 not
    return -F.logsigmoid(signs * logits).sum() / batch

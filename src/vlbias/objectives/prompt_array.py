r"""DebiasCLIP's prompt-array objectives (Berg et al., 2022, "A Prompt Array Keeps the Bias Away", AACL 2022, the
debiasing method and its figure): an adversary against learnable prompt tokens, with CLIP's contrastive loss that
keeps accuracy.

A prompt array :math:`P` (``K`` learnable token embeddings) is prepended to every text the frozen text encoder
reads (:mod:`vlbias.models.prompt_array`). For image :math:`i` with protected attribute :math:`a_i \in \{0, \dots,
G - 1\}` and :math:`Q` attribute-neutral queries :math:`t_1, \dots, t_Q` ("a person cooking."), the adversary
:math:`h_\phi` reads the image-text similarities

.. math::
    s_i(P) = \bigl(\cos(f(x_i), g([P; t_q]))\bigr)_{q=1}^{Q}

and predicts the attribute. Written out from the authors' description of the method (quoted below) and their
released code, the adversary's loss is the cross-entropy of its prediction over the batch of :math:`B` images,

.. math::
    \mathcal{L}_{adv}(\phi, P) = -\frac{1}{B} \sum_i \log \operatorname{softmax}(h_\phi(s_i(P)))_{a_i},

which the adversary minimises over :math:`\phi`; the prompts are trained to fool it ("optimized to maximize the
error of the adversary") jointly with "the original CLIP objective" on image-caption pairs,
:math:`\mathcal{L}_{itc}(P)` (:func:`~vlbias.objectives.itc_loss`, the captions read with the prompts), so the
prompts minimise

.. math::
    \mathcal{L}_{P}(P) = -\mathcal{L}_{adv}(\phi, P) + \lambda\, \mathcal{L}_{itc}(P).

How the two terms are weighed is a choice made here, not read off the paper (its equations were not at hand when
this was written): :math:`\lambda` weighs the contrastive term, so that :math:`\lambda = 0` is adversarial debiasing
alone (the negated cross-entropy the authors' code gives the prompts) and a larger :math:`\lambda` keeps more of
the image-text alignment. The two sides are minimised in alternation (:class:`vlbias.modules.PromptArrayDebiasing`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import InputError


def adversary_loss(logits: Tensor, attributes: Tensor) -> Tensor:
    r""":math:`\mathcal{L}_{adv}` (module docstring): the mean cross-entropy of the adversary's ``logits``
    ``(B, G)`` against each image's attribute ``attributes`` ``(B,)`` (integers in ``[0, G)``).

    Example:
        >>> import torch
        >>> round(adversary_loss(torch.zeros(2, 2), torch.tensor([0, 1])).item(), 4)  # log 2
        0.6931
    """
    if logits.ndim != 2 or attributes.shape != logits.shape[:1]:
        raise InputError(
            f"Expected adversary logits (B, G) and attributes (B,) but got {tuple(logits.shape)} and "
            f"{tuple(attributes.shape)}"
        )
    outside = attributes[(attributes < 0) | (attributes >= logits.shape[1])]
    if outside.numel():
        raise InputError(f"Expected attributes in [0, {logits.shape[1]}) but got {sorted(set(outside.tolist()))}")
    return F.cross_entropy(logits, attributes.long())


class PromptArrayLoss(NamedTuple):
    r"""The terms of the prompts' objective: ``total`` :math:`= -\mathcal{L}_{adv} + \lambda \mathcal{L}_{itc}`."""

    total: Tensor
    adversarial: Tensor
    contrastive: Tensor


def prompt_array_loss(adversary_logits: Tensor, attributes: Tensor, contrastive: Tensor, lam: float) -> PromptArrayLoss:
    r""":math:`\mathcal{L}_P = -\mathcal{L}_{adv} + \lambda \mathcal{L}_{itc}` (module docstring), the loss the
    prompts minimise, from the adversary's ``adversary_logits`` ``(B, G)`` on the prompted similarities, the
    images' ``attributes`` ``(B,)`` and the contrastive loss ``contrastive`` (a scalar, read with the prompts).

    Example:
        >>> import torch
        >>> parts = prompt_array_loss(torch.zeros(2, 2), torch.tensor([0, 1]), torch.tensor(1.0), lam=0.5)
        >>> round(parts.total.item(), 4)  # -log 2 + 0.5
        -0.1931
    """
    if lam < 0:
        raise InputError(f"Expected argument `lam` to be >= 0 but got {lam}")
    adversarial = adversary_loss(adversary_logits, attributes)
    return PromptArrayLoss(-adversarial + lam * contrastive, adversarial, contrastive)

r"""DebiasCLIP's prompt-array objectives (Berg et al., 2022, "A Prompt Array Keeps the Bias Away", AACL 2022, the
debiasing method and its figure): an adversary against learnable prompt tokens, with CLIP's contrastive loss that
keeps accuracy.

A prompt array :math:`P` (``K`` learnable token embeddings) is prepended to every text the frozen text encoder reads
(:mod:`vlbias.models.families.prompt_array`). For image :math:`i` with protected attribute
:math:`a_i \in \{0, \dots, G - 1\}` and :math:`Q` attribute-neutral queries :math:`t_1, \dots, t_Q` ("a person
cooking."), the adversary
:math:`h_\phi` reads the image-text similarities

.. math::
    s_i(P) = \bigl(\cos(f(x_i), g([P; t_q]))\bigr)_{q=1}^{Q}

and predicts the attribute (the paper's method figure, reproduced in the authors' README,
``oxai/debias-vision-lang`` ``figures/paper_figure.png``: learnable prompts before :math:`M` sensitive text queries,
the :math:`N \times M` image-query similarity scores into an MLP adversary, :math:`N` attribute predictions,
:math:`\mathcal{L}_{adversarial}`). The adversary's loss is the cross-entropy of its prediction over the batch of
:math:`B` images (as in the authors' training code, ``src/debias.py`` ``train_step_adv`` at commit ``adcbacc`` of
that repository: its current head has the inference code only),

.. math::
    \mathcal{L}_{adv}(\phi, P) = -\frac{1}{B} \sum_i \log \operatorname{softmax}(h_\phi(s_i(P)))_{a_i},

which the adversary minimises over :math:`\phi`; the prompts are trained to fool it ("optimized to maximize the
error of the adversary", the README's section "Debiasing with Adversarial Learning") jointly with "a contrastive
loss on image-text pairs (we use flickr30k train), the original CLIP objective" (the same section),
:math:`\mathcal{L}_{itc}(P)` (:func:`~vlbias.objectives.itc_loss`, the captions read with the prompts), so the
prompts minimise

.. math::
    \mathcal{L}_{P}(P) = -\mathcal{L}_{adv}(\phi, P) + \lambda\, \mathcal{L}_{itc}(P).

How the two terms are weighed is a choice made here, read off neither the paper (its text beyond the abstract was
not readable through this project's tools; its figure shows the adversarial loss only) nor the authors' code, where
the prompts' step minimises the negated cross-entropy plus, optionally, an L1/L2 penalty keeping the prompted
embeddings of the queries near the unprompted ones (``train_step_adv``), and CLIP's contrastive loss on Flickr30K
image-caption pairs trains the prompts in a separate script (``token_pretrain.py``, commit ``d921f48``).
:math:`\lambda` weighs the contrastive term, so that :math:`\lambda = 0` is adversarial debiasing alone (the
authors' prompt step without its penalty) and a larger :math:`\lambda` keeps more of the image-text alignment. The
two sides are minimised in alternation (:class:`vlbias.modules.PromptArrayDebiasing`).
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

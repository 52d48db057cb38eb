r"""Image-text contrastive loss (ITC), symmetric InfoNCE with several positives per row (ALBEF, Li et al.,
2021, Sec. 3.1, as its retrieval fine-tuning uses it; CLIP, Radford et al., 2021, Fig. 3, is the case of one
positive per row).

A batch of :math:`B` normalised image and text embeddings :math:`I_b, T_b` is compared with galleries of
:math:`N` texts :math:`\tilde T_n` and images :math:`\tilde I_n` (the whole batch, or the batches of every
rank gathered: more negatives). With :math:`s = \min(e^t, 100)` and the positive mask :math:`P \in \{0,1\}^{B
\times N}` (pair :math:`(b, n)` matches),

.. math::
    q_{bn} = \frac{P_{bn}}{\sum_{n'} P_{bn'}}, \qquad
    \mathcal{L} = -\frac{1}{2B} \sum_b \sum_n q_{bn} \left[ \log \operatorname{softmax}_n(s\, I_b \cdot \tilde T_n)
    + \log \operatorname{softmax}_n(s\, T_b \cdot \tilde I_n) \right]

With :math:`P` the identity (one positive per row) this is CLIP's loss. :func:`~vlbias.modules.contrastive_loss`
(``vlbias.modules.contrastive``) computes that one-positive, batch-local case inline and could use this
function.
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import InputError

MAX_SCALE = 100.0  # CLIP clamps the logit scale exp(t) at 100


def itc_loss(
    image_embeddings: Tensor,
    text_embeddings: Tensor,
    logit_scale: Tensor,
    gallery_images: Tensor | None = None,
    gallery_texts: Tensor | None = None,
    positives: Tensor | None = None,
) -> Tensor:
    """Symmetric InfoNCE of a batch against galleries (module docstring).

    Args:
        image_embeddings: ``(B, D)`` normalised image embeddings of the batch.
        text_embeddings: ``(B, D)`` normalised text embeddings; text ``b`` describes image ``b``.
        logit_scale: the log of the inverse temperature :math:`t` (a scalar tensor, learnable or not).
        gallery_images: ``(N, D)`` the images the texts are contrasted with (``None``: the batch's).
        gallery_texts: ``(N, D)`` the texts the images are contrasted with (``None``: the batch's).
        positives: ``(B, N)`` bool, pair ``(b, n)`` matches (``None``: the diagonal, ``N = B``); every row
            needs at least one positive.

    Example:
        >>> embeddings = torch.eye(3)
        >>> round(itc_loss(embeddings, embeddings, torch.tensor(0.0)).item(), 4)  # -log(e / (e + 2))
        0.5514
    """
    gallery_images = image_embeddings if gallery_images is None else gallery_images
    gallery_texts = text_embeddings if gallery_texts is None else gallery_texts
    batch, gallery = image_embeddings.shape[0], gallery_texts.shape[0]
    if positives is None:
        positives = torch.eye(batch, gallery, dtype=torch.bool, device=image_embeddings.device)
    if positives.shape != (batch, gallery) or gallery_images.shape[0] != gallery:
        raise InputError(
            f"Expected argument `positives` to be ({batch}, {gallery}) for {gallery} gallery texts and images but "
            f"got {tuple(positives.shape)} with {gallery_images.shape[0]} gallery images"
        )
    empty = (~positives.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise InputError(f"Expected every row of `positives` to hold a positive but rows {empty} hold none")
    scale = logit_scale.exp().clamp(max=MAX_SCALE)
    targets = positives.float() / positives.sum(dim=1, keepdim=True)  # (B, N)
    image_to_text = (scale * image_embeddings @ gallery_texts.T).log_softmax(dim=1)  # (B, N)
    text_to_image = (scale * text_embeddings @ gallery_images.T).log_softmax(dim=1)  # (B, N)
    return -((targets * image_to_text).sum(dim=1) + (targets * text_to_image).sum(dim=1)).mean() / 2

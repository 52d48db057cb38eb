"""Image-text matching with hard negatives (ALBEF, Li et al., 2021, Sec. 3.2).

For each image one negative text, and for each text one negative image, is drawn from the batch with
probability proportional to ``softmax(similarity)`` over the candidates that do not describe it (ALBEF
draws from the contrastive similarity, so negatives are the pairs the model confuses most); with no
similarity (an adapter without EMBED) the draw is uniform. The ITM loss is the binary cross-entropy of
the adapter's match log-odds against the pair labels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def sample_negatives(
    allowed: Tensor, similarity: Tensor | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """One candidate index per row ``(B,)``: drawn from ``allowed[i]`` ``(B, C)`` bool with probability
    proportional to ``softmax(similarity[i])`` (uniform when ``similarity`` is ``None``). A row that allows
    no candidate draws uniformly among all candidates but its own index (its label then says whether the
    drawn pair matches).

    Example:
        >>> allowed = torch.tensor([[False, True, False], [True, False, False], [False, True, False]])
        >>> sample_negatives(allowed).tolist()
        [1, 0, 1]
    """
    rows, columns = allowed.shape
    weights = torch.ones(rows, columns) if similarity is None else similarity.detach().float().softmax(dim=1).cpu()
    allowed = allowed.cpu()
    fallback = ~torch.eye(rows, columns, dtype=torch.bool)
    fallback[:, 0] |= columns == 1  # a single candidate is the only choice
    usable = torch.where(allowed.any(dim=1, keepdim=True), allowed, fallback)
    weights = torch.where(usable, weights + 1e-12, torch.zeros_like(weights))
    return torch.multinomial(weights, 1, generator=generator).squeeze(1)


def itm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Binary cross-entropy of match log-odds ``(N,)`` against labels ``(N,)`` (1: the pair matches), in float32.

    Example:
        >>> round(itm_loss(torch.zeros(2), torch.tensor([1.0, 0.0])).item(), 4)  # log 2
        0.6931
    """
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float().to(logits.device))


def hard_negative_itm(
    adapter,
    image_states: Tensor,
    text_states: dict[str, Tensor],
    describes: Tensor,
    similarity: Tensor | None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """ITM of ``adapter`` (a model with ``match_logits_of_states``) on a batch of B image-caption pairs with hard
    negatives: the B own pairs (label 1), one negative text per image and one negative image per text drawn by
    :func:`sample_negatives` among the pairs that ``describes`` ``(B, B)`` (caption ``j`` describes image ``i``)
    says do not match, each labelled by ``describes``; :func:`itm_loss` over the 3B pairs. ``image_states`` and
    ``text_states``: the adapter's ``image_states`` of the batch's images (their first B rows the B images) and
    ``text_states`` of its B captions, which ALBEF computes once per step for ITC and ITM alike (its vision
    encoder's tokens and its text layers' states); ``similarity`` ``(B, B)`` draws the negatives (``None``:
    uniformly)."""
    n = len(describes)
    negative_text = sample_negatives(~describes, similarity, generator)
    negative_image = sample_negatives(~describes.T, None if similarity is None else similarity.T, generator)
    own = torch.arange(n)
    device = text_states["input_ids"].device
    text_rows = torch.cat([own, negative_text, own]).to(device)
    image_rows = torch.cat([own, own, negative_image]).to(device)
    labels = torch.cat([torch.ones(n), describes[own, negative_text], describes[negative_image, own]])
    return itm_loss(adapter.match_logits_of_states(image_states, text_states, image_rows, text_rows), labels.float())

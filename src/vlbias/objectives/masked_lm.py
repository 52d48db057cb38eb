"""Masked language modelling: BERT's masking with a forced key word, and the masked-word cross-entropy."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE_INDEX = -100  # label of positions that carry no MLM loss (F.cross_entropy's default)


def mask_tokens(
    input_ids: Tensor,
    special: Tensor,
    key_ids: Tensor,
    mask_token_id: int,
    vocab_size: int,
    mask_rate: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """BERT's masking (Devlin et al., 2019, Sec. 3.1), as in ALBEF's MLM (Li et al., 2021, eq. 4),
    plus one *key word* per text that is always masked.

    Each non-special token is chosen with probability ``mask_rate``; in addition one token
    whose id is in ``key_ids`` (e.g. a group or activity word) is chosen uniformly per text that has
    one, so the model learns P(group | image, text) and P(activity | image, text), the
    probabilities CounterBias reads. Chosen tokens become ``[MASK]`` with probability 0.8, a
    random token with 0.1 and stay unchanged with 0.1.

    Args:
        input_ids: ``(B, T)`` token ids.
        special: ``(B, T)`` bool, positions never masked (special tokens, padding).
        key_ids: ``(K,)`` ids of the key words.
        mask_token_id: id of ``[MASK]``.
        vocab_size: random replacements are drawn from ``[0, vocab_size)``.
        mask_rate: probability that a non-special token is chosen.
        generator: random source (``None``: torch's global one).

    Returns:
        The masked ids ``(B, T)``, the labels ``(B, T)`` (the original id at chosen positions,
        ``-100`` elsewhere) and ``(B, T)`` bool, the forced key-word positions.

    Example:
        >>> ids = torch.tensor([[2, 10, 11, 12, 3]])
        >>> special = torch.tensor([[True, False, False, False, True]])
        >>> masked, labels, key = mask_tokens(ids, special, torch.tensor([11]), 4, 20, mask_rate=0.0)
        >>> labels.tolist(), key.tolist()
        ([[-100, -100, 11, -100, -100]], [[False, False, True, False, False]])
    """

    def rand() -> Tensor:  # (B, T) uniform draws from `generator`, on the ids' device
        return torch.rand(input_ids.shape, generator=generator).to(input_ids.device)

    is_key = torch.isin(input_ids, key_ids) & ~special  # (B, T)
    key_score = torch.where(is_key, rand(), torch.full(input_ids.shape, -1.0, device=input_ids.device))
    forced = F.one_hot(key_score.argmax(dim=1), input_ids.shape[1]).bool() & is_key  # one key word per text
    chosen = ((rand() < mask_rate) & ~special) | forced
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    action = rand()
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator).to(input_ids.device)
    masked = torch.where(chosen & (action < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, masked)
    return masked, labels, forced


def masked_lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """H(M, P([MASK] | V, L)): the mean cross-entropy of ``logits`` ``(B, T, V)`` at the positions where
    ``labels`` ``(B, T)`` is not ``-100`` (ALBEF eq. 4; one branch of FairVLP's Eq. 15), in float32.

    Example:
        >>> logits = torch.zeros(1, 2, 4)
        >>> round(masked_lm_loss(logits, torch.tensor([[1, IGNORE_INDEX]])).item(), 4)  # log 4
        1.3863
    """
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)

r"""FairVLP's objective (Zhang et al., 2022, Sec. 5.1, Eq. 14-16).

With :math:`P_f = P([\text{MASK}] \mid V_f, L_f)` and :math:`P_{cf} = P([\text{MASK}] \mid V_{cf}, L_{cf})`
at the masked positions:

.. math::
    \mathcal{L}_{KL} = D_{KL}(P_f \,\|\, P_{cf}) = \sum_v P_f(v) \,(\log P_f(v) - \log P_{cf}(v))
    \qquad (14)

    \mathcal{L}_{mlm} = \mathcal{H}(M, P_f) + \mathcal{H}(M_{cf}, P_{cf}) \qquad (15)

    \mathcal{L}_{FairVLP} = (1 - \alpha)\,\mathcal{L}_{mlm} + \alpha\,\mathcal{L}_{KL} \qquad (16)

Choices the paper leaves open, made here: the KL is averaged over the masked positions it covers (one
distribution per position); gradients flow through both branches (neither is detached); the
caller chooses which positions enter the KL (FairVLP leaves out positions whose masked word is itself a bias
word). The counterfactual branch is scored against the masked words the caller gives it, :math:`M_{cf}`: Eq. 15
writes M for both terms, and FairVLP's ``counterfactual_targets`` gives M or the words with the bias words
swapped (they differ only where a bias word is masked).
A term with no position to cover is 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import ConfigError
from vlbias.objectives.masked_lm import IGNORE_INDEX, masked_lm_loss


@dataclass
class FairVLPLoss:
    """Eq. 16 (``total``) and its parts: the two cross-entropies of Eq. 15 and the KL of Eq. 14."""

    total: Tensor
    mlm_factual: Tensor
    mlm_counterfactual: Tensor
    kl: Tensor


def counterfactual_kl(logits_f: Tensor, logits_cf: Tensor, positions: Tensor) -> Tensor:
    """Eq. 14: the mean over ``positions`` ``(B, T)`` bool of KL(P_f || P_cf), where P_f and P_cf are the
    softmax of ``logits_f`` and ``logits_cf`` ``(B, T, V)``; 0 (still in the graph) with no position.

    Example:
        >>> import torch
        >>> same = torch.randn(1, 3, 5)
        >>> counterfactual_kl(same, same, torch.ones(1, 3, dtype=torch.bool)).abs().item() < 1e-6
        True
    """
    if not positions.any():
        return (logits_f.sum() + logits_cf.sum()) * 0.0
    log_p_f = logits_f[positions].float().log_softmax(dim=-1)  # (N, V)
    log_p_cf = logits_cf[positions].float().log_softmax(dim=-1)
    return F.kl_div(log_p_cf, log_p_f, log_target=True, reduction="batchmean")  # sum P_f (log P_f - log P_cf) / N


def _mlm_or_zero(logits: Tensor, labels: Tensor) -> Tensor:
    return masked_lm_loss(logits, labels) if (labels != IGNORE_INDEX).any() else logits.sum() * 0.0


def fairvlp_loss(
    logits_f: Tensor,
    labels_f: Tensor,
    logits_cf: Tensor,
    labels_cf: Tensor,
    kl_positions: Tensor,
    alpha: float,
    cf_rows: Tensor | None = None,
) -> FairVLPLoss:
    """Eq. 16: ``(1 - alpha) * (H(M, P_f) + H(M_cf, P_cf)) + alpha * KL(P_f || P_cf)``.

    Args:
        logits_f: ``(B, T, V)`` masked-word logits of the factual pairs (V_f, L_f).
        labels_f: ``(B, T)`` their masked words M (``-100`` where nothing is masked).
        logits_cf: ``(N, T, V)`` logits of the counterfactual pairs (V_cf, L_cf) of rows ``cf_rows``.
        labels_cf: ``(N, T)`` their masked words M_cf.
        kl_positions: ``(N, T)`` bool, the positions of Eq. 14 (a subset of the masked ones).
        alpha: weight of the KL term, in [0, 1].
        cf_rows: ``(N,)`` the factual row of each counterfactual row (``None``: row ``n`` is row ``n``).

    Example:
        >>> import torch
        >>> logits, labels = torch.zeros(1, 2, 4), torch.tensor([[1, IGNORE_INDEX]])
        >>> loss = fairvlp_loss(logits, labels, logits, labels, labels != IGNORE_INDEX, alpha=0.5)
        >>> round(loss.total.item(), 4)  # 0.5 * 2 log 4 + 0.5 * 0
        1.3863
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"Expected `alpha` in [0, 1] but got {alpha!r}.")
    paired = logits_f if cf_rows is None else logits_f.index_select(0, cf_rows)  # (N, T, V)
    mlm_f = _mlm_or_zero(logits_f, labels_f)
    mlm_cf = _mlm_or_zero(logits_cf, labels_cf)
    kl = counterfactual_kl(paired, logits_cf, kl_positions)
    return FairVLPLoss((1.0 - alpha) * (mlm_f + mlm_cf) + alpha * kl, mlm_f, mlm_cf, kl)

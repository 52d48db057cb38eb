r"""Counterfactual consistency of a chat VLM's answers: FairVLP's KL term (Zhang et al., 2022, Sec. 5.1, Eq. 14)
carried from masked words to answers.

For a question :math:`q`, a factual image :math:`x_f` and a counterfactual image :math:`x_{cf}` (the person
swapped), :math:`P_f` and :math:`P_{cf}` are the model's answer distributions: over the question's ``K`` options,
:math:`P(a_k \mid x, q) = p(a_k \mid x, q) / \sum_j p(a_j \mid x, q)` with :math:`p(a \mid x, q)` the
teacher-forced sequence probability of answer :math:`a`
(:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.option_log_probs`); or over the vocabulary, the next
token's distribution after the prompt (:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.next_token_logits`).
Both come in as ``(rows, K)`` log-scores and are renormalised here over their last dimension (a log-softmax), so the
options' log-probabilities, their per-token means and logits are all accepted. The loss is the mean over the
``M`` (factual, counterfactual) pairs of one divergence (natural logarithms):

.. math::
    \mathcal{L}_{cons} = \frac{1}{M} \sum_{m=1}^{M} D(P_{f,r(m)}, P_{cf,m})

* ``kl``: :math:`D_{KL}(P_f \,\|\, P_{cf}) = \sum_k P_f(k) (\log P_f(k) - \log P_{cf}(k))`, Eq. 14's direction;
* ``symmetric_kl``: Jeffreys' divergence :math:`D_{KL}(P_f \| P_{cf}) + D_{KL}(P_{cf} \| P_f)` (the sum, not the
  mean, of the two directions);
* ``js``: Jensen-Shannon, :math:`\tfrac12 D_{KL}(P_f \| M) + \tfrac12 D_{KL}(P_{cf} \| M)` with
  :math:`M = \tfrac12 (P_f + P_{cf})`; bounded by :math:`\log 2`.

``gradient`` says which side the gradient flows through: ``both`` (the default), ``factual`` (the counterfactual
distribution is a fixed target, detached) or ``counterfactual`` (the factual distribution is the fixed target: the
counterfactual answers are pulled to the factual ones).

Against FairVLP (Eq. 14-16), vlbias **matches** Eq. 14 by default: the KL from the factual to the counterfactual
distribution, with the gradient through both sides (the paper writes no stop-gradient, and vlbias's FairVLP,
:mod:`vlbias.objectives.fairvlp`, detaches neither). It **differs** in what the distributions are over and what
is averaged: FairVLP compares masked-word distributions over the vocabulary at the masked text positions, the text
counterfactual and the image counterfactual (from a model-specific attack) changed together; here the question is
the same and only the image is swapped, the distributions are over whole answers (or the next token), and one
factual image may have several counterfactuals, each pair counting once in the mean (a question with three
counterfactual images weighs three times one with one). The symmetric and Jensen-Shannon divergences and the
one-sided gradients are vlbias's options, not the paper's. Eq. 15's cross-entropies (here the next-token loss on the
answers) and Eq. 16's weighting, :math:`(1-\alpha)\mathcal{L}_{mlm} + \alpha \mathcal{L}_{KL}`, belong to the
training loop that calls this function.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError

Divergence = Literal["kl", "symmetric_kl", "js"]
GradientSide = Literal["both", "factual", "counterfactual"]


def answer_consistency_loss(
    factual: Tensor,
    counterfactual: Tensor,
    factual_rows: Tensor | None = None,
    divergence: Divergence = "kl",
    gradient: GradientSide = "both",
) -> Tensor:
    """The mean over pairs of the divergence between factual and counterfactual answer distributions (see the
    module), in float32 at least (float64 inputs stay float64).

    Args:
        factual: ``(N, K)`` log-scores of the factual inputs' ``K`` answers (renormalised over ``K``).
        counterfactual: ``(M, K)`` those of the counterfactual inputs, the same ``K`` answers in the same order.
        factual_rows: ``(M,)`` the factual row of each counterfactual row (``None``: row ``m`` is row ``m``, so
            ``M == N``).
        divergence: ``kl``, ``symmetric_kl`` or ``js``.
        gradient: the side(s) the gradient flows through: ``both``, ``factual`` or ``counterfactual``.

    Example:
        >>> scores = torch.tensor([[-0.1, -2.3], [-1.2, -0.4]])
        >>> round(answer_consistency_loss(scores, scores.flip(0), divergence="js").item(), 4)
        0.199
        >>> answer_consistency_loss(scores, scores).item()
        0.0
    """
    check_consistency_choices(divergence, gradient)
    factual_rows = _checked_pairs(factual, counterfactual, factual_rows)
    log_p = _log_distribution(factual).index_select(0, factual_rows)  # (M, K)
    log_q = _log_distribution(counterfactual)  # (M, K)
    if gradient == "factual":
        log_q = log_q.detach()
    elif gradient == "counterfactual":
        log_p = log_p.detach()
    if divergence == "kl":
        per_pair = _kl(log_p, log_q)
    elif divergence == "symmetric_kl":
        per_pair = _kl(log_p, log_q) + _kl(log_q, log_p)
    else:
        log_m = torch.logaddexp(log_p, log_q) - math.log(2.0)
        per_pair = 0.5 * (_kl(log_p, log_m) + _kl(log_q, log_m))
    return per_pair.mean()


def _log_distribution(scores: Tensor) -> Tensor:
    """``scores`` renormalised over the last dimension (a log-softmax), in float32 at least."""
    return scores.to(torch.promote_types(scores.dtype, torch.float32)).log_softmax(dim=-1)


def _kl(log_p: Tensor, log_q: Tensor) -> Tensor:
    """``(M,)``: :math:`\\sum_k P(k) (\\log P(k) - \\log Q(k))` of each row."""
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)


def check_consistency_choices(divergence: str, gradient: str) -> None:
    """Refuse a ``divergence`` or ``gradient`` that is not one of :data:`Divergence` / :data:`GradientSide`."""
    for name, value, choices in (("divergence", divergence, Divergence), ("gradient", gradient, GradientSide)):
        if value not in get_args(choices):
            raise ConfigError(f"Expected `{name}` to be one of {list(get_args(choices))} but got {value!r}.")


def _checked_pairs(factual: Tensor, counterfactual: Tensor, factual_rows: Tensor | None) -> Tensor:
    """``factual_rows`` (``0..N-1`` when ``None``) after refusing scores that cannot be paired: not 2-D, of
    different numbers of answers, not finite, no pair at all, or a row index outside the factual rows."""
    if factual.ndim != 2 or counterfactual.ndim != 2 or factual.shape[1] != counterfactual.shape[1]:
        raise InputError(
            "Expected factual and counterfactual answer scores of shapes (N, K) and (M, K), the same K answers, but "
            f"got {tuple(factual.shape)} and {tuple(counterfactual.shape)}."
        )
    if counterfactual.shape[0] == 0:
        raise InputError("Expected at least one counterfactual answer distribution but got none: no pair to compare.")
    if factual_rows is None:
        if factual.shape[0] != counterfactual.shape[0]:
            raise InputError(
                f"Expected one counterfactual row per factual row without `factual_rows` but got {factual.shape[0]} "
                f"factual and {counterfactual.shape[0]} counterfactual rows."
            )
        factual_rows = torch.arange(factual.shape[0], device=factual.device)
    elif factual_rows.shape != (counterfactual.shape[0],) or factual_rows.dtype not in (torch.int64, torch.int32):
        raise InputError(
            f"Expected `factual_rows` of shape ({counterfactual.shape[0]},), one integer per counterfactual row, but "
            f"got shape {tuple(factual_rows.shape)} of {factual_rows.dtype}."
        )
    elif not ((factual_rows >= 0) & (factual_rows < factual.shape[0])).all():
        raise InputError(
            f"Expected `factual_rows` in [0, {factual.shape[0]}) but got {sorted(set(factual_rows.tolist()))}."
        )
    for side, scores in (("factual", factual), ("counterfactual", counterfactual)):
        if not torch.isfinite(scores).all():
            raise InputError(f"Expected finite {side} answer scores but they hold NaN or infinite values.")
    return factual_rows

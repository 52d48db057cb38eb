r"""The next-token loss of instruction tuning on multiple-choice answers, from the options' scores.

With :math:`\log p(a_i \mid x_i, q_i) = \sum_{l=1}^{L_i} \log p(a_{il} \mid x_i, q_i, a_{i,<l})` the log-probability
of question :math:`i`'s answer (:meth:`ChatVLMAdapter.option_log_probs
<vlbias.models.families.chat_vlm.ChatVLMAdapter.option_log_probs>`: the prompt's tokens are given, never predicted),
the loss is the cross-entropy per answer token over the batch,

.. math:: \mathcal{L} = -\frac{\sum_i \log p(a_i \mid x_i, q_i)}{\sum_i L_i},

what a causal language model's loss is with every prompt token's label masked (``-100``) and the answer's kept.
Under data parallelism each rank holds part of the batch; dividing each rank's sum by the mean over ranks of their
answer tokens (``tokens_per_rank``) makes DDP's average of the ranks' gradients the gradient of the whole batch's
loss, whatever the ranks' token counts.
"""

from __future__ import annotations

from torch import Tensor


def answer_nll(log_prob: Tensor, n_tokens: Tensor, answer: Tensor, tokens_per_rank: Tensor | None = None) -> Tensor:
    """The loss of the module docstring: ``log_prob`` and ``n_tokens`` ``(N, O)`` of every option of ``N`` questions,
    ``answer`` ``(N,)`` the index of each question's answer among them; divided by ``tokens_per_rank`` when given (the
    mean over data-parallel ranks of :func:`answer_tokens`), else by this batch's answer tokens.

    Example:
        >>> import torch
        >>> answer_nll(torch.tensor([[-2.0, -6.0], [-1.0, -3.0]]), torch.tensor([[2, 3], [1, 4]]), torch.tensor([1, 0]))
        tensor(1.7500)
    """
    rows = answer.to(log_prob.device)[:, None]
    divisor = answer_tokens(n_tokens, answer) if tokens_per_rank is None else tokens_per_rank
    return -log_prob.gather(1, rows).sum() / divisor


def answer_tokens(n_tokens: Tensor, answer: Tensor) -> Tensor:
    """The number of answer tokens of a batch: ``n_tokens`` ``(N, O)`` at each question's ``answer`` ``(N,)``."""
    return n_tokens.gather(1, answer.to(n_tokens.device)[:, None]).sum()

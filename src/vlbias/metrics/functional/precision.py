r"""Precision@K of text-to-image retrieval: the share of a query's first K images that are relevant to it.

.. math::
    \mathrm{Precision}@K(q) = \frac{1}{K} \sum_{i=1}^{K} \mathbb{1}[\tau_q(i) \text{ is relevant to } q]

with :math:`\tau_q` the ranking by descending score, ties broken by the lower image index (as
:func:`~vlbias.metrics.functional.ranking_bias.top_attributes`). Averaged over queries, with a percentile
bootstrap interval over queries (sorted first, a generator seeded with ``seed``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.bootstrap import percentile_interval, resampled_means
from vlbias.metrics.functional.checks import check_int, check_score_matrix, shape_or_type


def per_query_precision(scores: Tensor, relevant: Tensor, k: int) -> Tensor:
    """``(Q,)`` float64 Precision@K of each query from its ``(Q, N)`` scores and ``(Q, N)`` bool relevance."""
    check_score_matrix("scores", scores)
    if not isinstance(relevant, Tensor) or relevant.dtype != torch.bool or relevant.shape != scores.shape:
        raise InputError(
            f"Expected argument `relevant` to be a bool tensor of shape {tuple(scores.shape)} but got "
            f"{shape_or_type(relevant)}"
        )
    check_int("k", k, high=scores.shape[1], high_is="the gallery size")
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]  # (Q, k)
    return relevant.gather(1, order).double().mean(dim=1)


def _precision_compute(per_query: Tensor, n_bootstrap: int, confidence: float, seed: int) -> dict[str, Tensor]:
    """The mean over queries, its percentile bootstrap interval and ``n_queries``."""
    if per_query.numel() == 0:
        raise InputError("Expected at least one query with a labelled concept but got none")
    values = per_query.double().cpu().sort().values
    means = resampled_means(values, n_bootstrap, torch.Generator().manual_seed(seed))
    interval = percentile_interval(means, confidence)
    return {"precision": values.mean(), "precision_interval": interval, "n_queries": torch.tensor(values.numel())}


def precision_at_k(scores: Tensor, relevant: Tensor, k: int) -> Tensor:
    """Precision@K averaged over queries (module docstring).

    Args:
        scores: ``(n_queries, n_images)`` query-image scores.
        relevant: ``(n_queries, n_images)`` bool, whether each image is relevant to each query.
        k: the cut-off, at most ``n_images``.

    Example:
        >>> scores = torch.tensor([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
        >>> relevant = torch.tensor([[True, False, True], [True, False, True]])
        >>> precision_at_k(scores, relevant, k=2)  # (1/2 + 1/2) / 2
        tensor(0.5000, dtype=torch.float64)
    """
    return per_query_precision(scores, relevant, k).mean()

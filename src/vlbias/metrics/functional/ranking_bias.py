r"""Bias of what a retrieval model ranks first for gender-neutral queries.

Each query :math:`q` ranks a gallery of images, each annotated with a protected attribute value
:math:`a \in \{0, \dots, A-1\}` (e.g. 0 = man, 1 = woman, 2 = neither/unknown). :math:`\tau_q` is the
ranking by descending score (ties broken by the lower image index), :math:`p_{\tau,k,a}` the share of
attribute :math:`a` among its first :math:`k` images and :math:`p_a` the desired share (default uniform,
:math:`1/A`). Every statistic is computed per query and averaged over queries.

* Skew (Geyik, Ambler & Kenthapadi, 2019, "Fairness-Aware Ranking in Search & Recommendation Systems",
  KDD, Eq. 2), with MaxSkew@K and MinSkew@K (their Eq. 3, 4), the largest over- and under-representation:

  .. math::
      \mathrm{Skew}_a@K(\tau) = \ln \frac{p_{\tau,K,a} + \varepsilon}{p_a + \varepsilon}, \qquad
      \mathrm{MaxSkew}@K = \max_a \mathrm{Skew}_a@K, \qquad \mathrm{MinSkew}@K = \min_a \mathrm{Skew}_a@K

  An attribute absent from the top K has :math:`\ln 0 = -\infty` without smoothing; ``eps``
  (:math:`\varepsilon`, default :data:`DEFAULT_EPS`) keeps MinSkew finite, as the common implementations do.
  ``eps=0`` gives the paper's formula.

* NDKL, normalised discounted cumulative KL divergence (Geyik et al., 2019, Eq. 6), over the first K:

  .. math::
      \mathrm{NDKL}@K(\tau) = \frac{1}{Z} \sum_{i=1}^{K} \frac{1}{\log_2(i + 1)}
      d_\mathrm{KL}(D_{\tau,i} \,\|\, D), \qquad Z = \sum_{i=1}^{K} \frac{1}{\log_2(i + 1)}

  with :math:`D_{\tau,i} = (p_{\tau,i,a})_a` and :math:`D = (p_a)_a`; :math:`0 \ln 0 = 0`. 0 means every
  prefix has the desired shares.

* Bias@K (Wang, Liu & Wang, 2021, "Are Gender-Neutral Queries Really Gender-Neutral? Mitigating Gender
  Bias in Image Search", EMNLP, Sec. 3), for two groups (``groups=(men, women)``); images of any other
  value count in K but in neither group:

  .. math::
      \mathrm{Bias}@K = \frac{1}{|Q|} \sum_{q} \frac{N_\text{men}(q, K) - N_\text{women}(q, K)}{K}

The intervals are percentile bootstrap intervals of the mean over queries (queries resampled with
replacement, a private ``torch.Generator`` seeded with ``seed``; the per-query values are sorted first,
so the interval does not depend on the order the queries came in).
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.bootstrap import DEFAULT_BOOTSTRAP, percentile_interval, resampled_means
from vlbias.metrics.functional.checks import check_bootstrap, check_int, check_score_matrix, shape_or_type

DEFAULT_EPS = 1e-4
STATISTICS = ("max_skew", "min_skew", "ndkl", "bias")


def _check_inputs(scores: Tensor, attributes: Tensor, k: int, num_attributes: int) -> None:
    check_score_matrix("scores", scores)
    if not isinstance(attributes, Tensor) or attributes.is_floating_point() or attributes.shape != scores.shape[1:]:
        raise InputError(
            f"Expected argument `attributes` to be an integer tensor of shape ({scores.shape[1]},) but got "
            f"{shape_or_type(attributes)}"
        )
    check_int("num_attributes", num_attributes, low=2)
    if attributes.numel() and (int(attributes.min()) < 0 or int(attributes.max()) >= num_attributes):
        raise InputError(
            f"Expected argument `attributes` to hold values in [0, {num_attributes}) but got "
            f"[{int(attributes.min())}, {int(attributes.max())}]"
        )
    check_int("k", k, high=scores.shape[1], high_is="the gallery size")


def _desired(desired: Tensor | None, num_attributes: int) -> Tensor:
    if desired is None:
        return torch.full((num_attributes,), 1 / num_attributes, dtype=torch.float64)
    desired = torch.as_tensor(desired, dtype=torch.float64)
    if desired.shape != (num_attributes,) or bool((desired <= 0).any()) or abs(float(desired.sum()) - 1) > 1e-6:
        raise ConfigError(
            f"Expected argument `desired` to be {num_attributes} positive shares summing to 1 but got "
            f"{desired.tolist()}"
        )
    return desired


def _check_groups(groups: tuple[int, int], num_attributes: int) -> tuple[int, int]:
    if len(groups) != 2 or groups[0] == groups[1] or any(not 0 <= g < num_attributes for g in groups):
        raise ConfigError(
            f"Expected argument `groups` to be two distinct attribute values in [0, {num_attributes}) but got {groups!r}"
        )
    return int(groups[0]), int(groups[1])


def top_attributes(scores: Tensor, attributes: Tensor, k: int) -> Tensor:
    """Attribute values ``(n_queries, k)`` of each query's first ``k`` images, by descending score (ties: the
    lower image index first).

    Example:
        >>> top_attributes(torch.tensor([[0.1, 0.9, 0.5, 0.5]]), torch.tensor([0, 1, 1, 0]), k=3)
        tensor([[1, 1, 0]])
    """
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]  # (Q, k)
    return attributes.long()[order]


def _prefix_shares(top: Tensor, num_attributes: int) -> Tensor:
    """``(Q, K, A)``: shares of each attribute among the first ``i`` images, ``i = 1..K``."""
    counts = torch.nn.functional.one_hot(top, num_attributes).double().cumsum(dim=1)  # (Q, K, A)
    return counts / torch.arange(1, top.shape[1] + 1, dtype=torch.float64, device=top.device)[None, :, None]


def _per_query(
    top: Tensor, num_attributes: int, desired: Tensor, eps: float, groups: tuple[int, int]
) -> dict[str, Tensor]:
    """Every statistic for each query ``(Q,)`` from the top-K attributes ``(Q, K)``."""
    k, desired = top.shape[1], desired.to(top.device)
    shares = _prefix_shares(top, num_attributes)  # (Q, K, A)
    skew = torch.log((shares[:, -1] + eps) / (desired + eps))  # (Q, A)
    kl = torch.special.xlogy(shares, shares / desired).sum(dim=2)  # (Q, K); 0 ln 0 = 0
    discount = 1 / torch.log2(torch.arange(2, k + 2, dtype=torch.float64, device=top.device))  # (K,)
    return {
        "max_skew": skew.amax(dim=1),
        "min_skew": skew.amin(dim=1),
        "ndkl": (kl * discount).sum(dim=1) / discount.sum(),
        "bias": ((top == groups[0]).sum(dim=1) - (top == groups[1]).sum(dim=1)).double() / k,
    }


def _bootstrap_interval(values: Tensor, n_bootstrap: int, confidence: float, seed: int) -> Tensor:
    """Percentile bootstrap interval ``[low, high]`` of the mean of ``values``, resampled after sorting (NaN when
    a replicate is NaN, as it always was here)."""
    values = values.double().cpu().sort().values
    means = resampled_means(values, n_bootstrap, torch.Generator().manual_seed(seed))
    return percentile_interval(means, confidence, omit_nan=False)


def _ranking_bias_compute(
    per_query: dict[str, Tensor], n_bootstrap: int, confidence: float, seed: int
) -> dict[str, Tensor]:
    """Means over queries, their bootstrap intervals (``<name>_interval``) and ``n_queries``."""
    n_queries = per_query["bias"].numel()
    if n_queries == 0:
        raise InputError("Expected at least one query but got none")
    out: dict[str, Tensor] = {}
    for offset, name in enumerate(STATISTICS):  # one seed per statistic, the same on every rank
        out[name] = per_query[name].mean()
        out[f"{name}_interval"] = _bootstrap_interval(per_query[name], n_bootstrap, confidence, seed + offset)
    out["n_queries"] = torch.tensor(n_queries)
    return out


def _ranking_bias_update(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int,
    desired: Tensor,
    eps: float,
    groups: tuple[int, int],
) -> dict[str, Tensor]:
    _check_inputs(scores, attributes, k, num_attributes)
    return _per_query(top_attributes(scores, attributes, k), num_attributes, desired, eps, groups)


def _statistic(
    name: str,
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int,
    desired: Tensor | None,
    eps: float,
    groups: tuple[int, int],
) -> Tensor:
    desired = _desired(desired, num_attributes)
    groups = _check_groups(groups, num_attributes)
    return _ranking_bias_update(scores, attributes, k, num_attributes, desired, eps, groups)[name].mean()


def max_skew_at_k(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    desired: Tensor | None = None,
    eps: float = DEFAULT_EPS,
) -> Tensor:
    """MaxSkew@K (Geyik et al., 2019, Eq. 3) averaged over queries; see the module docstring.

    Args:
        scores: ``(n_queries, n_images)`` query-image scores.
        attributes: ``(n_images,)`` attribute value of each image, in ``[0, num_attributes)``.
        k: the cut-off, at most ``n_images``.
        num_attributes: number of attribute values A.
        desired: ``(A,)`` desired shares; default uniform.
        eps: smoothing of the shares inside the log.

    Example:
        >>> scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]])  # top 2: two men
        >>> round(max_skew_at_k(scores, torch.tensor([0, 0, 1, 1]), k=2, eps=0.0).item(), 4)  # ln(1 / 0.5)
        0.6931
    """
    return _statistic("max_skew", scores, attributes, k, num_attributes, desired, eps, (0, 1))


def min_skew_at_k(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    desired: Tensor | None = None,
    eps: float = DEFAULT_EPS,
) -> Tensor:
    """MinSkew@K (Geyik et al., 2019, Eq. 4) averaged over queries; arguments as :func:`max_skew_at_k`.

    Example:
        >>> scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]])  # top 4: three men, one woman
        >>> round(min_skew_at_k(scores, torch.tensor([0, 0, 1, 0]), k=4, eps=0.0).item(), 4)  # ln(0.25 / 0.5)
        -0.6931
    """
    return _statistic("min_skew", scores, attributes, k, num_attributes, desired, eps, (0, 1))


def ndkl(scores: Tensor, attributes: Tensor, k: int, num_attributes: int = 2, desired: Tensor | None = None) -> Tensor:
    """NDKL@K (Geyik et al., 2019, Eq. 6) averaged over queries; arguments as :func:`max_skew_at_k`.

    Example:
        >>> scores = torch.tensor([[2.0, 1.0]])  # man, woman: KL(top 1) = ln 2, KL(top 2) = 0
        >>> round(ndkl(scores, torch.tensor([0, 1]), k=2).item(), 4)  # ln 2 / (1 + 1 / log2(3))
        0.425
    """
    return _statistic("ndkl", scores, attributes, k, num_attributes, desired, 0.0, (0, 1))


def bias_at_k(
    scores: Tensor, attributes: Tensor, k: int, num_attributes: int = 2, groups: tuple[int, int] = (0, 1)
) -> Tensor:
    """Bias@K = (N_men − N_women) / K (Wang et al., 2021) averaged over queries; ``groups`` are the attribute
    values of (men, women); other arguments as :func:`max_skew_at_k`.

    Example:
        >>> scores = torch.tensor([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
        >>> bias_at_k(scores, torch.tensor([0, 2, 1]), k=2, num_attributes=3)  # (1 - 0) / 2, (0 - 1) / 2
        tensor(0., dtype=torch.float64)
    """
    return _statistic("bias", scores, attributes, k, num_attributes, None, 0.0, groups)


def ranking_bias(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    desired: Tensor | None = None,
    eps: float = DEFAULT_EPS,
    groups: tuple[int, int] = (0, 1),
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Tensor]:
    """MaxSkew@K, MinSkew@K, NDKL@K and Bias@K averaged over queries, each with a bootstrap interval.

    Args:
        scores, attributes, k, num_attributes, desired, eps: see :func:`max_skew_at_k`.
        groups: see :func:`bias_at_k`.
        n_bootstrap: bootstrap replicates (queries resampled with replacement).
        confidence: coverage of the percentile intervals.
        seed: seed of the bootstrap generator.

    Returns:
        float64 ``max_skew``, ``min_skew``, ``ndkl``, ``bias``, each with ``<name>_interval`` ``[low, high]``,
        and int64 ``n_queries``.

    Example:
        >>> scores = torch.tensor([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
        >>> out = ranking_bias(scores, torch.tensor([0, 0, 1]), k=2, n_bootstrap=100)
        >>> out["bias"], out["bias_interval"]  # (2 - 0) / 2 and (1 - 1) / 2
        (tensor(0.5000, dtype=torch.float64), tensor([0., 1.], dtype=torch.float64))
    """
    desired = _desired(desired, num_attributes)
    groups = _check_groups(groups, num_attributes)
    check_bootstrap(n_bootstrap, confidence)
    per_query = _ranking_bias_update(scores, attributes, k, num_attributes, desired, eps, groups)
    return _ranking_bias_compute(per_query, n_bootstrap, confidence, seed)

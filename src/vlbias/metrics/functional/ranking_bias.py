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

* KL@K, the KL divergence of the top-K shares from the desired shares, at K only (undiscounted; BendVLM,
  Gerych et al., 2024, report it beside MaxSkew: ``get_kl`` of waltergerych/bend_vlm ``bend_utils.py``):

  .. math::
      \mathrm{KL}@K(\tau) = d_\mathrm{KL}(D_{\tau,K} \,\|\, D) = \sum_a p_{\tau,K,a} \ln \frac{p_{\tau,K,a}}{p_a}

  with :math:`0 \ln 0 = 0` and no smoothing, like NDKL; with ``ties="keep"`` the shares are those of the skews
  (the kept images over K).

* Bias@K (Wang, Liu & Wang, 2021, "Are Gender-Neutral Queries Really Gender-Neutral? Mitigating Gender
  Bias in Image Search", EMNLP, Sec. 3), for two groups (``groups=(men, women)``); images of any other
  value count in K but in neither group:

  .. math::
      \mathrm{Bias}@K = \frac{1}{|Q|} \sum_{q} \frac{N_\text{men}(q, K) - N_\text{women}(q, K)}{K}

The formulas above are the defaults. Papers that report MaxSkew differ in four conventions, the fields of
:class:`SkewConventions`, which every function here takes as its ``conventions`` argument (the named sets are
:mod:`vlbias.metrics.ranking_protocols`):

* ``desired``, the desired shares :math:`p_a`: ``"uniform"`` over all A values, :math:`1/A` (a value absent
  from the gallery still counted); ``"present"``, :math:`1/|G|` over the set :math:`G` of values present in the
  gallery, 0 for the others; ``"gallery"``, the gallery's own shares :math:`n_a / N`; or an ``(A,)`` tensor of
  positive shares summing to 1. A value with :math:`p_a = 0` (absent from the gallery) takes no part in the skews
  and adds nothing to the KL divergences.
* ``zero``, how a share of 0 is kept out of the log: ``"add_eps"`` (above: :math:`\ln\frac{p + \varepsilon}
  {p_a + \varepsilon}`); ``"one_over_k"``, :math:`\ln\frac{p'}{p_a}` with :math:`p' = 1/K` where
  :math:`p = 0` (``eps`` unused); ``"floor"``, :math:`\ln \max(p / p_a, \varepsilon)`. NDKL is always
  computed with :math:`0 \ln 0 = 0` and no smoothing.
* ``ties`` at the cut-off: ``"index"`` keeps exactly the first K images (ties by the lower index);
  ``"keep"`` keeps every image whose score equals the K-th's as well, in the same order, while the divisor of
  the top-K shares stays K (so :math:`\sum_a p_{\tau,K,a}` may exceed 1). NDKL then sums over every kept
  position :math:`i` (its shares divided by :math:`i`), and :math:`Z` stays the sum over :math:`i \le K`;
  Bias@K counts the kept images over K.
* ``skew``, the skew's form: ``"log_ratio"`` (above) or ``"abs_log_ratio"``, :math:`|\mathrm{Skew}_a@K|`,
  whose max over :math:`a` is MaxSkew@K and whose min is MinSkew@K.

The intervals are percentile bootstrap intervals of the mean over queries (queries resampled with
replacement, a private ``torch.Generator`` seeded with ``seed``; the per-query values are sorted first,
so the interval does not depend on the order the queries came in).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.bootstrap import percentile_interval, resampled_means
from vlbias.metrics.functional.checks import check_bootstrap, check_int, check_score_matrix, shape_or_type
from vlbias.options import DEFAULT_STATISTICS

DEFAULT_EPS = 1e-4
STATISTICS = ("max_skew", "min_skew", "ndkl", "bias", "kl")  # "kl" last: each keeps its bootstrap seed
DESIRED = ("uniform", "present", "gallery")  # or an (A,) tensor of shares
ZERO = ("add_eps", "one_over_k", "floor")
TIES = ("index", "keep")
SKEW = ("log_ratio", "abs_log_ratio")


@dataclass(frozen=True, eq=False)
class SkewConventions:
    """The conventions of the skews and NDKL (module docstring): ``desired`` (a name of :data:`DESIRED` or an
    ``(A,)`` tensor of positive shares summing to 1), ``zero`` (:data:`ZERO`), ``eps``, ``ties`` (:data:`TIES`)
    and ``skew`` (:data:`SKEW`). The defaults are Geyik et al.'s formulas with ε = :data:`DEFAULT_EPS`."""

    desired: str | Tensor = "uniform"
    zero: str = "add_eps"
    eps: float = DEFAULT_EPS
    ties: str = "index"
    skew: str = "log_ratio"

    def __post_init__(self) -> None:
        for name, value, known in (("zero", self.zero, ZERO), ("ties", self.ties, TIES), ("skew", self.skew, SKEW)):
            if value not in known:
                raise ConfigError(f"Expected argument `{name}` to be one of {list(known)} but got {value!r}")
        if not isinstance(self.desired, str | Tensor) or (
            isinstance(self.desired, str) and self.desired not in DESIRED
        ):
            raise ConfigError(
                f"Expected argument `desired` to be one of {list(DESIRED)} or a tensor of shares but got "
                f"{self.desired!r}"
            )
        if not isinstance(self.eps, int | float) or not 0 <= self.eps < float("inf"):
            raise ConfigError(f"Expected argument `eps` to be a finite number >= 0 but got {self.eps!r}")


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


def _conventions(conventions: SkewConventions | None, num_attributes: int) -> SkewConventions:
    """``conventions`` (``None``: the defaults) with a given ``desired`` checked and made a float64 tensor."""
    if conventions is None:
        return SkewConventions()
    if not isinstance(conventions, SkewConventions):
        raise ConfigError(
            f"Expected argument `conventions` to be a SkewConventions (or a protocol's `.conventions`) but got "
            f"{conventions!r}"
        )
    desired = conventions.desired
    if isinstance(desired, str):
        return conventions
    desired = torch.as_tensor(desired, dtype=torch.float64)
    if desired.shape != (num_attributes,) or bool((desired <= 0).any()) or abs(float(desired.sum()) - 1) > 1e-6:
        raise ConfigError(
            f"Expected argument `desired` to be {num_attributes} positive shares summing to 1 but got "
            f"{desired.tolist()}"
        )
    return replace(conventions, desired=desired)


def desired_shares(desired: str | Tensor, attributes: Tensor, num_attributes: int) -> Tensor:
    """The ``(A,)`` float64 desired shares named by ``desired`` (module docstring) for the gallery ``attributes``.

    Example:
        >>> desired_shares("present", torch.tensor([0, 0, 2, 0]), 3)  # value 1 is absent from the gallery
        tensor([0.5000, 0.0000, 0.5000], dtype=torch.float64)
        >>> desired_shares("gallery", torch.tensor([0, 0, 2, 0]), 3)
        tensor([0.7500, 0.0000, 0.2500], dtype=torch.float64)
    """
    if isinstance(desired, Tensor):
        return desired.to(device=attributes.device, dtype=torch.float64)
    if desired == "uniform":
        return torch.full((num_attributes,), 1 / num_attributes, dtype=torch.float64, device=attributes.device)
    counts = torch.bincount(attributes.long(), minlength=num_attributes).double()  # (A,)
    if desired == "present":
        counts = (counts > 0).double()
    return counts / counts.sum()


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


def _ranked(scores: Tensor, attributes: Tensor, k: int, ties: str) -> tuple[Tensor, Tensor | None]:
    """``(Q, L)`` attribute values in rank order and, for ``ties="keep"``, the ``(Q, L)`` mask of the kept
    positions (every image scored at least the K-th's; ``L``: the most any query keeps); ``L = K`` and no mask for
    ``ties="index"``."""
    if ties == "index":
        return top_attributes(scores, attributes, k), None
    ordered, order = torch.sort(scores, dim=1, descending=True, stable=True)  # (Q, N)
    kept = ordered >= ordered[:, k - 1 : k]  # (Q, N): a prefix of each row
    length = int(kept.sum(dim=1).max())
    return attributes.long()[order[:, :length]], kept[:, :length]


def _prefix_counts(top: Tensor, kept: Tensor | None, num_attributes: int) -> Tensor:
    """``(Q, L, A)``: counts of each attribute among the first ``i`` kept images, ``i = 1..L``."""
    one_hot = torch.nn.functional.one_hot(top, num_attributes).double()  # (Q, L, A)
    if kept is not None:
        one_hot = one_hot * kept[:, :, None]
    return one_hot.cumsum(dim=1)


def top_counts(scores: Tensor, attributes: Tensor, k: int, num_attributes: int = 2, ties: str = "index") -> Tensor:
    """``(n_queries, A)`` float64 counts of each attribute among each query's top ``k`` images (``ties``: see the
    module docstring; ``"keep"`` counts every image tied with the K-th too).

    Example:
        >>> scores, attributes = torch.tensor([[3.0, 2.0, 2.0, 1.0]]), torch.tensor([0, 0, 1, 1])
        >>> top_counts(scores, attributes, k=2), top_counts(scores, attributes, k=2, ties="keep")
        (tensor([[2., 0.]], dtype=torch.float64), tensor([[2., 1.]], dtype=torch.float64))
    """
    SkewConventions(ties=ties)
    _check_inputs(scores, attributes, k, num_attributes)
    top, kept = _ranked(scores, attributes, k, ties)
    return _prefix_counts(top, kept, num_attributes)[:, -1]


def _per_query(
    top: Tensor, kept: Tensor | None, k: int, desired: Tensor, conventions: SkewConventions, groups: tuple[int, int]
) -> dict[str, Tensor]:
    """Every statistic for each query ``(Q,)`` from the ranked attributes ``(Q, L)`` (and kept mask) of
    :func:`_ranked`; ``desired`` ``(A,)`` float64."""
    desired = desired.to(top.device)
    counts = _prefix_counts(top, kept, desired.numel())  # (Q, L, A)
    positions = torch.arange(1, top.shape[1] + 1, dtype=torch.float64, device=top.device)  # (L,)
    shares = counts / positions[None, :, None]  # (Q, L, A)
    share, eps, valid = counts[:, -1] / k, conventions.eps, desired > 0  # (Q, A), (A,)
    if conventions.zero == "add_eps":
        ratio = (share + eps) / (desired + eps)
    elif conventions.zero == "one_over_k":
        ratio = torch.where(share == 0, 1 / k, share) / desired
    else:  # "floor"
        ratio = (share / desired).clamp_min(eps)
    skew = torch.log(ratio)  # (Q, A)
    if conventions.skew == "abs_log_ratio":
        skew = skew.abs()
    kl = torch.where(valid, torch.special.xlogy(shares, shares / desired), 0.0).sum(dim=2)  # (Q, L); 0 ln 0 = 0
    discount = 1 / torch.log2(positions + 1)  # (L,)
    weight = discount if kept is None else discount * kept  # (L,) or (Q, L)
    return {
        "max_skew": torch.where(valid, skew, -torch.inf).amax(dim=1),
        "min_skew": torch.where(valid, skew, torch.inf).amin(dim=1),
        "ndkl": (kl * weight).sum(dim=1) / discount[:k].sum(),
        "bias": (counts[:, -1, groups[0]] - counts[:, -1, groups[1]]) / k,
        "kl": torch.where(valid, torch.special.xlogy(share, share / desired), 0.0).sum(dim=1),
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
    """Means over queries, their bootstrap intervals (``<name>_interval``), how many queries' values are infinite
    (``<name>_n_infinite``) and ``n_queries``."""
    n_queries = per_query["bias"].numel()
    if n_queries == 0:
        raise InputError("Expected at least one query but got none")
    out: dict[str, Tensor] = {}
    for offset, name in enumerate(STATISTICS):  # one seed per statistic, the same on every rank
        out[name] = per_query[name].mean()
        out[f"{name}_interval"] = _bootstrap_interval(per_query[name], n_bootstrap, confidence, seed + offset)
        out[f"{name}_n_infinite"] = per_query[name].isinf().sum()
    out["n_queries"] = torch.tensor(n_queries)
    return out


def _ranking_bias_update(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int,
    conventions: SkewConventions,
    groups: tuple[int, int],
) -> dict[str, Tensor]:
    _check_inputs(scores, attributes, k, num_attributes)
    top, kept = _ranked(scores, attributes, k, conventions.ties)
    desired = desired_shares(conventions.desired, attributes, num_attributes)
    return _per_query(top, kept, k, desired, conventions, groups)


def _statistic(
    name: str,
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int,
    conventions: SkewConventions,
    groups: tuple[int, int],
) -> Tensor:
    conventions = _conventions(conventions, num_attributes)
    groups = _check_groups(groups, num_attributes)
    return _ranking_bias_update(scores, attributes, k, num_attributes, conventions, groups)[name].mean()


def max_skew_at_k(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    conventions: SkewConventions | None = None,
) -> Tensor:
    """MaxSkew@K (Geyik et al., 2019, Eq. 3) averaged over queries; see the module docstring.

    Args:
        scores: ``(n_queries, n_images)`` query-image scores.
        attributes: ``(n_images,)`` attribute value of each image, in ``[0, num_attributes)``.
        k: the cut-off, at most ``n_images``.
        num_attributes: number of attribute values A.
        conventions: the desired shares, zero and tie handling and skew form (:class:`SkewConventions`; default
            Geyik et al.'s); a named protocol's are ``ranking_protocol(name).conventions``
            (:func:`~vlbias.metrics.ranking_protocols.ranking_protocol`).

    Example:
        >>> scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]])  # top 2: two men
        >>> exact = SkewConventions(eps=0.0)
        >>> round(max_skew_at_k(scores, torch.tensor([0, 0, 1, 1]), k=2, conventions=exact).item(), 4)  # ln(1 / 0.5)
        0.6931
    """
    return _statistic("max_skew", scores, attributes, k, num_attributes, conventions, (0, 1))


def min_skew_at_k(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    conventions: SkewConventions | None = None,
) -> Tensor:
    """MinSkew@K (Geyik et al., 2019, Eq. 4) averaged over queries; arguments as :func:`max_skew_at_k`.

    Example:
        >>> scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]])  # top 4: three men, one woman
        >>> exact = SkewConventions(eps=0.0)
        >>> round(min_skew_at_k(scores, torch.tensor([0, 0, 1, 0]), k=4, conventions=exact).item(), 4)  # ln(1/4 / 1/2)
        -0.6931
    """
    return _statistic("min_skew", scores, attributes, k, num_attributes, conventions, (0, 1))


def ndkl(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    conventions: SkewConventions | None = None,
) -> Tensor:
    """NDKL@K (Geyik et al., 2019, Eq. 6) averaged over queries; arguments as :func:`max_skew_at_k` (of the
    conventions, NDKL reads ``desired`` and ``ties``: it never smooths).

    Example:
        >>> scores = torch.tensor([[2.0, 1.0]])  # man, woman: KL(top 1) = ln 2, KL(top 2) = 0
        >>> round(ndkl(scores, torch.tensor([0, 1]), k=2).item(), 4)  # ln 2 / (1 + 1 / log2(3))
        0.425
    """
    return _statistic("ndkl", scores, attributes, k, num_attributes, conventions, (0, 1))


def kl_at_k(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    conventions: SkewConventions | None = None,
) -> Tensor:
    """KL@K, the KL divergence of the top-K shares from the desired shares (module docstring), averaged over
    queries; arguments as :func:`max_skew_at_k` (of the conventions, KL@K reads ``desired`` and ``ties``).

    Example:
        >>> scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]])  # top 2: two men
        >>> round(kl_at_k(scores, torch.tensor([0, 0, 1, 1]), k=2).item(), 4)  # 1 ln(1 / 0.5) + 0
        0.6931
    """
    return _statistic("kl", scores, attributes, k, num_attributes, conventions, (0, 1))


def bias_at_k(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    groups: tuple[int, int] = (0, 1),
    conventions: SkewConventions | None = None,
) -> Tensor:
    """Bias@K = (N_men − N_women) / K (Wang et al., 2021) averaged over queries; ``groups`` are the attribute
    values of (men, women); other arguments as :func:`max_skew_at_k` (of the conventions, Bias@K reads ``ties``).

    Example:
        >>> scores = torch.tensor([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
        >>> bias_at_k(scores, torch.tensor([0, 2, 1]), k=2, num_attributes=3)  # (1 - 0) / 2, (0 - 1) / 2
        tensor(0., dtype=torch.float64)
    """
    return _statistic("bias", scores, attributes, k, num_attributes, conventions, groups)


def ranking_bias(
    scores: Tensor,
    attributes: Tensor,
    k: int,
    num_attributes: int = 2,
    conventions: SkewConventions | None = None,
    groups: tuple[int, int] = (0, 1),
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
) -> dict[str, Tensor]:
    """MaxSkew@K, MinSkew@K, NDKL@K, Bias@K and KL@K averaged over queries, each with a bootstrap interval.

    Args:
        scores, attributes, k, num_attributes, conventions: see :func:`max_skew_at_k`.
        groups: see :func:`bias_at_k`.
        n_bootstrap: bootstrap replicates (queries resampled with replacement).
        confidence: coverage of the percentile intervals.
        seed: seed of the bootstrap generator.

    Returns:
        float64 ``max_skew``, ``min_skew``, ``ndkl``, ``bias``, ``kl``, each with ``<name>_interval`` ``[low, high]``
        and int64 ``<name>_n_infinite`` (the queries whose value is infinite: the ``sfid`` convention's skew of a zero
        count, ``ln 0``), and int64 ``n_queries``.

    Example:
        >>> scores = torch.tensor([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
        >>> out = ranking_bias(scores, torch.tensor([0, 0, 1]), k=2, n_bootstrap=100)
        >>> out["bias"], out["bias_interval"]  # (2 - 0) / 2 and (1 - 1) / 2
        (tensor(0.5000, dtype=torch.float64), tensor([0., 1.], dtype=torch.float64))
    """
    conventions = _conventions(conventions, num_attributes)
    groups = _check_groups(groups, num_attributes)
    check_bootstrap(n_bootstrap, confidence)
    per_query = _ranking_bias_update(scores, attributes, k, num_attributes, conventions, groups)
    return _ranking_bias_compute(per_query, n_bootstrap, confidence, seed)

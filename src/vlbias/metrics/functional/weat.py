r"""Association tests of the WEAT family: effect size, permutation p-value, bootstrap interval.

Caliskan et al. (2017) measure bias with target sets :math:`X, Y` and attribute sets :math:`A, B`.
Ross et al. (2021) write the per-target association, the test statistic and the effect size as

.. math::
    s(w, A, B) = \operatorname{mean}_{a \in A} \cos(w, a) - \operatorname{mean}_{b \in B} \cos(w, b)
    \qquad \text{(Ross Eq. 1; MMBias Eq. 1, } \phi\text{)}

    s(X, Y, A, B) = \sum_{x \in X} s(x, A, B) - \sum_{y \in Y} s(y, A, B)  \qquad \text{(Ross Eq. 2)}

    d = \frac{\operatorname{mean}_{x \in X} s(x, A, B) - \operatorname{mean}_{y \in Y} s(y, A, B)}
             {\operatorname{std}_{w \in X \cup Y} s(w, A, B)}  \qquad \text{(Ross Eq. 3; MMBias Eq. 1)}

MMBias (Janghorbani & de Melo, 2023, Eq. 1, last row) replaces the cosine by the image-text matching
probability of fusion models: :math:`\sigma(w, A, B) = \operatorname{mean}_{a} \sigma(w, a) -
\operatorname{mean}_{b} \sigma(w, b)`.

Every statistic depends on the embeddings only through the per-target association scores, so the
statistics are written once on scores (``*_from_associations``); ``weat_*`` (cosine) and ``itm_*``
(matching probabilities) are thin wrappers that compute the scores first. The ``*_from_associations``
functions sort their inputs before use, so results do not depend on the order of the items (the
same on 1 or N processes), and compute and return float64.

Example:
    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1]]); y = torch.tensor([[0.0, 1.0], [0.1, 0.9]])
    >>> a = torch.tensor([[1.0, 0.0]]); b = torch.tensor([[0.0, 1.0]])
    >>> round(weat_effect_size(x, y, a, b).item(), 4)
    1.7287
    >>> weat_p_value(x, y, a, b).item()  # exact: 1 of the C(4, 2) = 6 partitions is as extreme
    0.16666666666666666
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.bootstrap import (
    IntervalMethod,
    bca_interval,
    leave_one_out_values,
    percentile_interval,
)
from vlbias.metrics.functional.checks import (
    check_bootstrap,
    check_embeddings,
    check_int,
    check_interval_method,
    check_same_dim,
    check_scores,
    shape_or_type,
)
from vlbias.metrics.functional.chunks import chunk_rows
from vlbias.metrics.functional.permutation import REPARTITION_EXACT_LIMIT, repartition_p_value
from vlbias.options import DEFAULT_STATISTICS


# ----------------------------------------------------------------------------- input checks
def _sorted_scores(name: str, scores: Tensor) -> Tensor:
    """Association scores checked (:func:`~vlbias.metrics.functional.checks.check_scores`), sorted, as float64."""
    return check_scores(name, scores).to(torch.float64).sort().values


def _check_probabilities(name: str, probabilities: Tensor) -> Tensor:
    if not isinstance(probabilities, Tensor) or probabilities.ndim != 2:
        raise InputError(
            f"Expected argument `{name}` to be a 2-D tensor (targets, attributes) of match probabilities "
            f"but got {shape_or_type(probabilities)}"
        )
    if 0 in probabilities.shape:
        raise InputError(f"Expected argument `{name}` to be non-empty but got shape {tuple(probabilities.shape)}")
    outside = int((~((probabilities >= 0) & (probabilities <= 1))).sum())  # also catches NaN
    if outside:
        raise InputError(
            f"Expected match probabilities in [0, 1] in `{name}` but {outside} of {probabilities.numel()} values are "
            "outside it or NaN (pass probabilities, e.g. softmax(itm_logits)[:, 1], not logits)"
        )
    return probabilities


def _check_equal_sizes(n_x: int, n_y: int) -> None:
    if n_x != n_y:
        raise InputError(
            f"Expected target sets of equal size for the permutation test but got |X| = {n_x} and |Y| = {n_y}: "
            "May et al.'s test compares s(X, Y, A, B) with its value over re-partitions of X ∪ Y into equal halves, "
            "where it reduces to sum_X s(x, A, B). The effect size is still defined; use it alone, or pass "
            "allow_unequal_sizes=True to re-partition into sets of sizes |X| and |Y|"
        )


# ----------------------------------------------------------------------------- association scores
def _association(w: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """s(w, A, B) of checked embeddings, computed in their promoted dtype (a float32 and a float64 set mix)."""
    dtype = functools.reduce(torch.promote_types, (w.dtype, a.dtype, b.dtype))
    w, a, b = (F.normalize(m.to(dtype), dim=1) for m in (w, a, b))
    return (w @ a.T).mean(dim=1) - (w @ b.T).mean(dim=1)


def weat_association(w: Tensor, a: Tensor, b: Tensor) -> Tensor:
    r"""Per-target association :math:`s(w, A, B) = \operatorname{mean}_{a} \cos(w, a) -
    \operatorname{mean}_{b} \cos(w, b)` (Ross Eq. 1, MMBias Eq. 1 :math:`\phi`).

    Args:
        w: target embeddings, ``(n_w, d)``; need not be normalised.
        a: attribute set A, ``(n_a, d)``.
        b: attribute set B, ``(n_b, d)``.

    Returns:
        ``(n_w,)`` scores in the promoted floating dtype of the inputs.
    """
    w, a, b = check_embeddings("w", w), check_embeddings("a", a), check_embeddings("b", b)
    check_same_dim(w=w, a=a, b=b)
    return _association(w, a, b)


def itm_association(match_a: Tensor, match_b: Tensor, top_k: int | None = None) -> Tensor:
    r"""MMBias's matching-probability association :math:`\sigma(w, A, B) = \operatorname{mean}_{a \in A}
    \sigma(w, a) - \operatorname{mean}_{b \in B} \sigma(w, b)` (MMBias Eq. 1, last row).

    MMBias (Sec. 5, ALBEF and ViLT) adds: "In order to reduce irrelevant noise only the top 15 most
    significant matches are considered", without saying over what. Our reading, applied with
    ``top_k = k``: for each target, the means run over its ``k`` highest match probabilities within A
    and, separately, its ``k`` highest within B, so both sets keep the same weight and the score is
    still a difference of mean probabilities. (Ranking A ∪ B together and counting the share of
    pleasant words, as in MMBias's zero-shot experiment, is another reading we do not implement.)

    Args:
        match_a: ``(n_w, |A|)`` probabilities that target ``w`` matches attribute ``a``.
        match_b: ``(n_w, |B|)`` the same for attribute set B.
        top_k: keep only the ``top_k`` largest probabilities per target in each set; ``None`` keeps all.

    Returns:
        ``(n_w,)`` scores.

    Example:
        >>> match_a = torch.tensor([[0.9, 0.1, 0.2]]); match_b = torch.tensor([[0.3, 0.4, 0.5]])
        >>> itm_association(match_a, match_b)  # (0.9 + 0.1 + 0.2) / 3 - (0.3 + 0.4 + 0.5) / 3
        tensor([0.])
        >>> itm_association(match_a, match_b, top_k=1)  # 0.9 - 0.5
        tensor([0.4000])
    """
    return _itm_association(match_a, match_b, top_k, names=("match_a", "match_b"))


def _itm_association(match_a: Tensor, match_b: Tensor, top_k: int | None, names: tuple[str, str]) -> Tensor:
    match_a, match_b = _check_probabilities(names[0], match_a), _check_probabilities(names[1], match_b)
    if match_a.shape[0] != match_b.shape[0]:
        raise InputError(
            f"Expected `{names[0]}` and `{names[1]}` to have one row per target each but got {match_a.shape[0]} "
            f"and {match_b.shape[0]} rows"
        )
    if top_k is None:
        return match_a.mean(dim=1) - match_b.mean(dim=1)
    smallest = min(match_a.shape[1], match_b.shape[1])
    sizes = f"the smaller attribute set: |A| = {match_a.shape[1]}, |B| = {match_b.shape[1]}"
    check_int("top_k", top_k, high=smallest, none_allowed=True, high_is=sizes)
    return match_a.topk(top_k, dim=1).values.mean(dim=1) - match_b.topk(top_k, dim=1).values.mean(dim=1)


# ----------------------------------------------------------------------------- statistics on scores
def statistic_from_associations(s_x: Tensor, s_y: Tensor) -> Tensor:
    r""":math:`s(X, Y, A, B) = \sum_{x} s(x, A, B) - \sum_{y} s(y, A, B)` (Ross Eq. 2), float64 scalar."""
    s_x, s_y = _sorted_scores("s_x", s_x), _sorted_scores("s_y", s_y)
    return s_x.sum() - s_y.sum()


def mean_difference_from_associations(s_x: Tensor, s_y: Tensor) -> Tensor:
    r"""Numerator of the effect size, :math:`\operatorname{mean}_x s - \operatorname{mean}_y s`; with ITM scores
    this is the "probabilistic difference" MMBias reports for ALBEF and ViLT (Table 2), float64 scalar."""
    s_x, s_y = _sorted_scores("s_x", s_x), _sorted_scores("s_y", s_y)
    return s_x.mean() - s_y.mean()


def effect_size_from_associations(s_x: Tensor, s_y: Tensor) -> Tensor:
    r"""Effect size :math:`d` (Ross Eq. 3, MMBias Eq. 1) from per-target association scores.

    The denominator is the *sample* standard deviation (divisor :math:`n - 1`) of the scores pooled over
    :math:`X \cup Y`, as in May et al.'s SEAT reference code (``sentbias/weat.py``:
    ``np.std(..., ddof=1)`` over ``X + Y``), so our numbers compare with the published SEAT and
    Grounded-WEAT tables. It is undefined (NaN) when all pooled scores are equal.

    Args:
        s_x: ``(n_x,)`` scores of the targets in X.
        s_y: ``(n_y,)`` scores of the targets in Y; ``n_x + n_y >= 2``.

    Returns:
        float64 scalar.
    """
    s_x, s_y = _sorted_scores("s_x", s_x), _sorted_scores("s_y", s_y)
    return _effect_size(s_x.unsqueeze(0), s_y.unsqueeze(0))[0]


def _effect_size(s_x: Tensor, s_y: Tensor) -> Tensor:
    """Row-wise effect size of ``(R, n_x)`` and ``(R, n_y)`` score matrices."""
    pooled_std = torch.cat([s_x, s_y], dim=1).std(dim=1, correction=1)
    return (s_x.mean(dim=1) - s_y.mean(dim=1)) / pooled_std


def p_value_from_associations(
    s_x: Tensor,
    s_y: Tensor,
    n_permutations: int = DEFAULT_STATISTICS.n_permutations,
    seed: int = 0,
    exact_limit: int = REPARTITION_EXACT_LIMIT,
    allow_unequal_sizes: bool = False,
) -> Tensor:
    r"""One-sided permutation p-value of May et al. (2019), used by Ross et al. (Sec. 5):
    :math:`P[s(X_i, Y_i, A, B) \ge s(X, Y, A, B)]` over the re-partitions of :math:`X \cup Y` into sets
    :math:`X_i, Y_i` of the sizes of X and Y. Ties count as "at least as extreme" (May et al.'s conservative ``>=``).

    **Test statistic.** Over re-partitions that keep the sizes, with :math:`T = \sum_{X \cup Y} s` fixed,
    the WEAT statistic :math:`s(X_i, Y_i) = \sum_{X_i} s - \sum_{Y_i} s = 2 \sum_{X_i} s - T` (Caliskan et al.
    2017, Eq. 1-3; Ross Eq. 2), the mean difference :math:`\operatorname{mean}_{X_i} s - \operatorname{mean}_{Y_i} s
    = (1/|X| + 1/|Y|) \sum_{X_i} s - T / |Y|` (the effect size's numerator) and the effect size itself (its pooled
    standard deviation is the same for every re-partition) are all increasing functions of
    :math:`\sum_{X_i} s`, so they order the re-partitions alike and give one p-value; only :math:`\sum_{X_i} s`
    is computed. This holds for unequal sizes too: the sum difference and the mean difference are then different
    numbers but not different tests. With :math:`|X| = |Y|` it is May et al.'s test exactly.

    * **Sizes.** May et al. define the test for :math:`|X| = |Y|` (halves); unequal sizes raise unless
      ``allow_unequal_sizes=True``, which re-partitions into sets of sizes :math:`|X|` and :math:`|Y|` (the
      permutation test of a two-sample difference in means; Good, *Permutation Tests*, 2005, ch. 3).
    * **Exact** when :math:`C(|X|+|Y|, |X|) \le` ``exact_limit`` (default
      :data:`~vlbias.metrics.functional.permutation.REPARTITION_EXACT_LIMIT` = 1e9, i.e. up to 16 items per set)
      and both sets have at most :data:`~vlbias.metrics.functional.permutation.MAX_EXACT_SET_SIZE` items: the
      p-value is (number of re-partitions as extreme, the observed one included) / :math:`C(|X|+|Y|, |X|)`, counted
      over all of them by a meet-in-the-middle count
      (:func:`~vlbias.metrics.functional.permutation.repartition_p_value`).
    * **Sampled** otherwise: ``n_permutations`` = P uniformly random re-partitions (default
      :class:`~vlbias.options.StatisticsOptions`' ``n_permutations``) and :math:`p = (1 + \#\{\ge\}) / (1 + P)`.
      Counting the observed partition once keeps p > 0 and makes the test valid at every level (Phipson &
      Smyth, 2010); it is May et al.'s estimator ("hallucinate a positive observation"), whose 100,000 samples are
      P = 99,999 (the ``weat`` suite's default). Its Monte-Carlo standard error is about :math:`\sqrt{p(1-p)/P}`.

    Deterministic for a given ``seed`` (a private ``numpy.random.Generator``) and independent of the order of
    the items. Set ``exact_limit=0`` to force sampling.

    Args:
        s_x: ``(n_x,)`` association scores of X.
        s_y: ``(n_y,)`` association scores of Y; ``n_y = n_x`` unless ``allow_unequal_sizes``.
        n_permutations: random re-partitions when sampling.
        seed: seed of the generator used when sampling.
        exact_limit: largest number of re-partitions tested exactly.
        allow_unequal_sizes: test :math:`|X| \ne |Y|` by re-partitions of the original sizes instead of raising.

    Returns:
        float64 scalar in (0, 1].
    """
    s_x, s_y = _sorted_scores("s_x", s_x), _sorted_scores("s_y", s_y)
    if not allow_unequal_sizes:
        _check_equal_sizes(s_x.numel(), s_y.numel())
    check_int("n_permutations", n_permutations)
    check_int("exact_limit", exact_limit, low=0)
    return repartition_p_value(s_x, s_y, n_permutations, seed, exact_limit)


def interval_from_associations(
    s_x: Tensor,
    s_y: Tensor,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_STATISTICS.interval_method,
) -> Tensor:
    r"""Stratified bootstrap interval of the effect size: BCa (default) or percentile.

    Each replicate resamples X's scores (with replacement, :math:`n_x` of them) and Y's scores
    (:math:`n_y`) separately, keeping the two groups' sizes as in the design, and recomputes :math:`d`
    with the same pooled sample standard deviation. Replicates whose pooled scores are all equal have no
    effect size and are left out (NaN if all are). The attribute sets are held fixed: the interval reflects
    the choice of target items only. Both methods read the same replicates (the same ``seed``, the same draws).

    * ``"percentile"`` (Efron & Tibshirani, 1993, ch. 13): the :math:`(1-c)/2` and :math:`(1+c)/2` quantiles
      (linear interpolation) of the replicates, :func:`~vlbias.metrics.functional.bootstrap.percentile_interval`.
    * ``"bca"`` (Efron, 1987; Efron & Tibshirani, 1993, ch. 14, Eq. 14.10): the quantiles at the adjusted levels
      :math:`\alpha_{1,2} = \Phi\big(\hat z_0 + (\hat z_0 + z_{(1 \mp c)/2}) / (1 - \hat a (\hat z_0 +
      z_{(1 \mp c)/2}))\big)`, :func:`~vlbias.metrics.functional.bootstrap.bca_interval`, its acceleration
      :math:`\hat a` over :func:`_effect_size_jackknife`. At 8--12 items per set it covers closer to ``c`` than the
      percentile interval (``scripts/bootstrap_coverage.py``). NaN where the adjusted levels are undefined
      (:math:`\hat z_0 = \pm\infty`: every replicate on one side of :math:`d`).

    Args:
        s_x: ``(n_x,)`` association scores of X.
        s_y: ``(n_y,)`` association scores of Y.
        n_bootstrap: number of replicates.
        confidence: coverage ``c`` in (0, 1).
        seed: seed of the private ``torch.Generator``.
        method: ``"bca"`` or ``"percentile"``.

    Returns:
        float64 tensor ``[low, high]``.
    """
    s_x, s_y = _sorted_scores("s_x", s_x), _sorted_scores("s_y", s_y)
    check_bootstrap(n_bootstrap, confidence)
    check_interval_method(method)
    replicates = _bootstrap_replicates(s_x, s_y, n_bootstrap, torch.Generator().manual_seed(seed))
    if method == "percentile":
        return percentile_interval(replicates, confidence)
    observed = _effect_size(s_x.unsqueeze(0), s_y.unsqueeze(0))[0]
    return bca_interval(replicates, confidence, observed, _effect_size_jackknife(s_x, s_y))


def _bootstrap_replicates(s_x: Tensor, s_y: Tensor, n_bootstrap: int, generator: torch.Generator) -> Tensor:
    """``(n_bootstrap,)`` effect sizes of stratified resamples, drawn in chunks (X's indices, then Y's, per chunk)."""
    n_x, n_y = s_x.numel(), s_y.numel()
    rows_per_chunk = chunk_rows(n_x + n_y)
    replicates = []
    for start in range(0, n_bootstrap, rows_per_chunk):
        rows = min(rows_per_chunk, n_bootstrap - start)
        resampled_x = s_x[torch.randint(n_x, (rows, n_x), generator=generator)]  # (rows, n_x)
        resampled_y = s_y[torch.randint(n_y, (rows, n_y), generator=generator)]  # (rows, n_y)
        replicates.append(_effect_size(resampled_x, resampled_y))
    return torch.cat(replicates)


def _effect_size_jackknife(s_x: Tensor, s_y: Tensor) -> list[Tensor]:
    """The effect size's jackknife values for BCa's acceleration: each item of X left out in turn (Y whole,
    ``(n_x,)``), then each item of Y (X whole, ``(n_y,)``); a set of one item has no jackknife values."""
    n_x, n_y = s_x.numel(), s_y.numel()
    jackknife = []
    if n_x > 1:
        jackknife.append(
            leave_one_out_values(lambda x: _effect_size(x, s_y.expand(len(x), -1)), s_x, row_width=n_x + n_y)
        )
    if n_y > 1:
        jackknife.append(
            leave_one_out_values(lambda y: _effect_size(s_x.expand(len(y), -1), y), s_y, row_width=n_x + n_y)
        )
    return jackknife


# ----------------------------------------------------------------------------- cosine (WEAT/SEAT) wrappers
def _target_associations(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    x, y = check_embeddings("x", x), check_embeddings("y", y)
    a, b = check_embeddings("a", a), check_embeddings("b", b)
    check_same_dim(x=x, y=y, a=a, b=b)
    return _association(x, a, b), _association(y, a, b)


def weat_test_statistic(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """Test statistic s(X, Y, A, B) (Ross Eq. 2) of embeddings ``(n, d)``; see :func:`statistic_from_associations`."""
    return statistic_from_associations(*_target_associations(x, y, a, b))


def weat_effect_size(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """Effect size d (Ross Eq. 3) of embeddings ``(n, d)``; see :func:`effect_size_from_associations`
    (sample standard deviation, n − 1, over X ∪ Y, as in May et al.'s code)."""
    return effect_size_from_associations(*_target_associations(x, y, a, b))


def weat_p_value(
    x: Tensor,
    y: Tensor,
    a: Tensor,
    b: Tensor,
    n_permutations: int = DEFAULT_STATISTICS.n_permutations,
    seed: int = 0,
    exact_limit: int = REPARTITION_EXACT_LIMIT,
    allow_unequal_sizes: bool = False,
) -> Tensor:
    """Permutation p-value of May et al. for embeddings ``(n, d)``, ``|X| = |Y|`` unless ``allow_unequal_sizes``;
    the scores s(w, A, B) are computed once and only they are re-partitioned. See
    :func:`p_value_from_associations`."""
    s_x, s_y = _target_associations(x, y, a, b)
    return p_value_from_associations(
        s_x,
        s_y,
        n_permutations=n_permutations,
        seed=seed,
        exact_limit=exact_limit,
        allow_unequal_sizes=allow_unequal_sizes,
    )


def weat_effect_size_interval(
    x: Tensor,
    y: Tensor,
    a: Tensor,
    b: Tensor,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_STATISTICS.interval_method,
) -> Tensor:
    """Stratified bootstrap interval ``[low, high]`` (``method``: ``"bca"`` or ``"percentile"``) of the effect size
    of embeddings ``(n, d)``; see :func:`interval_from_associations`."""
    s_x, s_y = _target_associations(x, y, a, b)
    return interval_from_associations(
        s_x, s_y, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, method=method
    )


# ----------------------------------------------------------------------------- matching-probability wrappers
def itm_effect_size(
    x_match_a: Tensor, x_match_b: Tensor, y_match_a: Tensor, y_match_b: Tensor, top_k: int | None = None
) -> Tensor:
    r"""Effect size of MMBias Eq. 1 with :math:`\sigma(w, A, B)` scores of fusion models (ALBEF, ViLT);
    see :func:`itm_association` (``top_k``) and :func:`effect_size_from_associations`.

    Args:
        x_match_a: ``(n_x, |A|)`` match probabilities of the targets in X with the attributes in A.
        x_match_b: ``(n_x, |B|)`` the same with B.
        y_match_a: ``(n_y, |A|)`` match probabilities of the targets in Y with A.
        y_match_b: ``(n_y, |B|)`` the same with B.
        top_k: keep each target's ``top_k`` largest probabilities per attribute set.
    """
    s_x = _itm_association(x_match_a, x_match_b, top_k, names=("x_match_a", "x_match_b"))
    s_y = _itm_association(y_match_a, y_match_b, top_k, names=("y_match_a", "y_match_b"))
    for name, x_cols, y_cols in (
        ("A", x_match_a.shape[1], y_match_a.shape[1]),
        ("B", x_match_b.shape[1], y_match_b.shape[1]),
    ):
        if x_cols != y_cols:
            raise InputError(
                f"Expected X and Y to be matched against the same attribute set {name} but got {x_cols} and "
                f"{y_cols} columns"
            )
    return effect_size_from_associations(s_x, s_y)

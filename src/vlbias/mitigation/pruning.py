r"""MI-guided pruning of embedding dimensions (MMBias, Janghorbani & de Melo, 2023, Sec. 6, Algorithm 1).

Algorithm 1, with :math:`\operatorname{Compute\_Bias}` the cross-modal effect size of Eq. 1
(:math:`d(X^I, Y^I, A^T, B^T)`, cosine similarities):

1. :math:`\Psi` = the bias with all :math:`D` dimensions;
2. candidates: the dimensions :math:`d` with :math:`\operatorname{MI}(v^I_d, L) < \Theta`, the mutual
   information of image coordinate :math:`d` with the classification labels :math:`L`
   (:func:`mutual_information`), so that only dimensions redundant for classification are touched;
3. :math:`\psi_d` = the bias with dimension :math:`d` removed from image and text embeddings
   (:func:`~vlbias.mitigation.leave_one_out.leave_one_out_effect_sizes`, all :math:`d` in one pass);
4. the candidates with :math:`\psi_d < \Psi`, sorted ascending by :math:`\psi_d`; the first :math:`N` are removed.

Reading of the pseudo-code: its last two lines (:math:`Z \leftarrow \operatorname{sort}_{\psi_d}(X)[0:N]`,
:math:`X \leftarrow X \setminus Z`, return :math:`X`) return the candidates that are *not* removed, while
the text and the comment say that :math:`Z`, the :math:`N` dimensions that lower the bias most, are
removed ("pruning N dimensions that cause the largest decrease in bias effect size"). We implement the text:
:attr:`PruningResult.removed` is :math:`Z`, in the order of the sort.

Strategies (``strategy``):

* ``"ranked"``: Algorithm 1 as above, one ranking;
* ``"greedy"``: the text's "removing features in a greedy manner": remove the best candidate, recompute
  :math:`\psi` on the remaining dimensions (one vectorised pass per step), compare with the bias of the
  remaining dimensions, repeat :math:`N` times;
* ``"clip_clip"``: the CLIP-clip baseline (Wang et al., 2021a): remove the :math:`N` dimensions with the
  *highest* MI with the protected attribute (pass the images' group labels as ``labels``); no :math:`\Theta`.

Several bias tests: the objective reduces the per-test effect sizes to one number, ``"mean_abs"``
(default, :math:`\operatorname{mean}_t |d_t|`) or ``"max_abs"`` (:math:`\max_t |d_t|`), and
":math:`\psi_d < \Psi`" compares that number. Absolute values: a test with :math:`d < 0` favours Y, so
making its :math:`d` more negative is more bias, not less; with :math:`|d|` a removal that pushes a test
across zero counts the size of its new bias. With one test this is Algorithm 1 on :math:`|d|`, which equals
the paper's :math:`d` when it is positive, as in all of Table 3. Signed per-test values are reported.

Options: :math:`\Theta` as a value (``theta=0.3``) or as a quantile of the MI of all dimensions
(``theta_quantile=0.9``: :math:`\Theta` is that quantile, linear interpolation, so about 90% of the
dimensions are candidates); exactly one of the two. :math:`N` (``n_remove``) as a count (an ``int``) or a
fraction of :math:`D` (a ``float`` in (0, 1), rounded to the nearest count: Table 3 removes 10%).

Example:
    >>> g = torch.Generator().manual_seed(0)
    >>> x, y, a, b = (torch.randn(8, 16, generator=g, dtype=torch.float64) for _ in range(4))
    >>> result = select_dimensions([BiasTest("t", x, y, a, b)], torch.zeros(16), n_remove=2, theta=1.0)
    >>> len(result.removed), result.objective_after < result.objective_before
    (2, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_embeddings
from vlbias.mitigation.knn_mutual_info import knn_mutual_information
from vlbias.mitigation.leave_one_out import (
    checked_sets,
    effect_size_unchecked,
    kept_dimensions,
    leave_one_out_unchecked,
)
from vlbias.mitigation.removal_count import removal_count

STRATEGIES = ("ranked", "greedy", "clip_clip")
OBJECTIVES: dict[str, Callable[[Tensor], Tensor]] = {
    "mean_abs": lambda d: d.abs().mean(0),  # over tests: (T,) -> scalar, (T, D) -> (D,)
    "max_abs": lambda d: d.abs().max(0).values,
}


class BiasTest(NamedTuple):
    """One cross-modal test of MMBias Eq. 1: target images X, Y ``(n, D)``, attribute texts A, B ``(m, D)``."""

    name: str
    x: Tensor
    y: Tensor
    a: Tensor
    b: Tensor


@dataclass(frozen=True)
class PruningResult:
    """What a pruning run removed and what it did to the bias; :meth:`to_dict` is JSON-serialisable.

    ``removal_scores[i]`` is the score ``removed[i]`` was chosen by: :math:`\\psi` (the objective without
    it; for ``greedy``, without it and the dimensions removed before it) or, for ``clip_clip``, its MI.
    ``objective_*`` is :math:`\\Psi` before and after; ``effect_sizes_*`` the signed :math:`d` per test.
    ``theta`` is :math:`\\Theta` as used (resolved from ``theta_quantile`` when that was given) and
    ``n_candidates`` the number of dimensions with MI below it (both ``None`` for ``clip_clip``);
    ``seed`` seeds the MI estimator (``None`` when the MI was given).
    """

    strategy: str
    objective: str
    n_remove: int
    removed: list[int]
    kept: list[int]
    removal_scores: list[float]
    objective_before: float
    objective_after: float
    effect_sizes_before: dict[str, float]
    effect_sizes_after: dict[str, float]
    mutual_information: list[float]
    theta: float | None
    theta_quantile: float | None
    n_candidates: int | None
    seed: int | None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def mutual_information(images: Tensor, labels: Tensor, seed: int = 0, n_neighbors: int = 3) -> Tensor:
    r""":math:`\operatorname{MI}(v_d, L)` of every embedding coordinate with discrete labels, in nats: ``(D,)`` float64.

    The kNN estimator of Ross (2014) with ``n_neighbors`` neighbours, as scikit-learn's ``mutual_info_classif``
    computes it, value for value, but for all ``D`` coordinates at once
    (:func:`~vlbias.mitigation.knn_mutual_info.knn_mutual_information`); ``seed`` fixes the small noise it adds to
    break ties.
    """
    images = check_embeddings("images", images)
    labels = torch.as_tensor(labels)
    if labels.shape != (images.shape[0],):
        raise InputError(f"Expected one label per image, shape ({images.shape[0]},), but got {tuple(labels.shape)}")
    classes = labels.unique()
    if classes.numel() < 2:
        raise InputError(f"Expected labels of at least 2 classes for mutual information but all are {classes.tolist()}")
    values = knn_mutual_information(images.detach().cpu().double().numpy(), labels.cpu().numpy(), n_neighbors, seed)
    return torch.from_numpy(values)


def prune_dimensions(
    tests: Sequence[BiasTest],
    images: Tensor,
    labels: Tensor,
    n_remove: int | float,
    *,
    strategy: str = "ranked",
    theta: float | None = None,
    theta_quantile: float | None = None,
    objective: str = "mean_abs",
    seed: int = 0,
) -> PruningResult:
    """Algorithm 1 (or ``strategy``) with the MI of ``images`` ``(n, D)`` with ``labels`` ``(n,)``:
    :func:`mutual_information` then :func:`select_dimensions` (see the module for the options)."""
    dim = _checked_tests(tests)[0].x.shape[1]
    if images.ndim != 2 or images.shape[1] != dim:
        raise InputError(f"Expected `images` of shape (n, {dim}), the tests' dimension, but got {tuple(images.shape)}")
    mi = mutual_information(images, labels, seed=seed)
    result = select_dimensions(
        tests, mi, n_remove, strategy=strategy, theta=theta, theta_quantile=theta_quantile, objective=objective
    )
    return dataclasses.replace(result, seed=seed)


def select_dimensions(
    tests: Sequence[BiasTest],
    mutual_info: Tensor,
    n_remove: int | float,
    *,
    strategy: str = "ranked",
    theta: float | None = None,
    theta_quantile: float | None = None,
    objective: str = "mean_abs",
) -> PruningResult:
    """The dimensions to remove, given the MI of each dimension ``(D,)``; see the module docstring."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"Expected `strategy` to be one of {STRATEGIES} but got {strategy!r}")
    if objective not in OBJECTIVES:
        raise ConfigError(f"Expected `objective` to be one of {tuple(OBJECTIVES)} but got {objective!r}")
    tests = _checked_tests(tests)
    dim = tests[0].x.shape[1]
    mutual_info = torch.as_tensor(mutual_info, dtype=torch.float64)
    if mutual_info.shape != (dim,) or not torch.isfinite(mutual_info).all():
        raise InputError(f"Expected finite mutual information of shape ({dim},) but got {tuple(mutual_info.shape)}")
    n = removal_count(n_remove, dim)
    reduce = OBJECTIVES[objective]
    before = _effect_sizes(tests, torch.arange(0))

    if strategy == "clip_clip":
        if theta is not None or theta_quantile is not None:
            raise ConfigError(
                f"Strategy 'clip_clip' takes no Θ but got theta={theta!r}, theta_quantile={theta_quantile!r}"
            )
        removed = most_informative(mutual_info, n)
        scores, threshold, n_candidates = mutual_info[removed], None, None
    else:
        threshold = _threshold(mutual_info, theta, theta_quantile)
        candidates = mutual_info < threshold
        n_candidates = int(candidates.sum())
        if n_candidates == 0:
            raise ConfigError(
                f"Θ = {threshold:.6g} leaves no candidate dimension: the smallest MI is {float(mutual_info.min()):.6g}"
            )
        select = _ranked if strategy == "ranked" else _greedy
        removed, scores = select(tests, candidates, n, reduce, reduce(before))
    removed = removed.tolist()
    after = _effect_sizes(tests, torch.tensor(removed, dtype=torch.long))
    return PruningResult(
        strategy=strategy,
        objective=objective,
        n_remove=n,
        removed=removed,
        kept=sorted(set(range(dim)) - set(removed)),
        removal_scores=scores.tolist(),
        objective_before=float(reduce(before)),
        objective_after=float(reduce(after)),
        effect_sizes_before=dict(zip((t.name for t in tests), before.tolist())),
        effect_sizes_after=dict(zip((t.name for t in tests), after.tolist())),
        mutual_information=mutual_info.tolist(),
        theta=threshold,
        theta_quantile=theta_quantile,
        n_candidates=n_candidates,
        seed=None,
    )


def most_informative(mutual_info: Tensor, n: int) -> Tensor:
    """CLIP-clip's choice (Wang et al., 2021a): the ``n`` dimensions of the highest mutual information ``(D,)`` with
    the protected attribute, highest first (ties: the lower dimension first)."""
    return mutual_info.argsort(descending=True, stable=True)[:n]


def _ranked(
    tests: list[BiasTest], candidates: Tensor, n: int, reduce: Callable, psi_all: Tensor
) -> tuple[Tensor, Tensor]:
    """Algorithm 1: one leave-one-out ranking of the candidates below ``psi_all`` (Ψ); the first ``n``."""
    psi = reduce(torch.stack([leave_one_out_unchecked(*t[1:]) for t in tests]))  # (D,)
    eligible = (candidates & (psi < psi_all)).nonzero().squeeze(1)
    if eligible.numel() < n:
        raise ConfigError(
            f"Expected N = {n} dimensions to remove to be at most the {eligible.numel()} candidates whose removal "
            f"lowers the bias Ψ = {float(psi_all):.6g} (of {int(candidates.sum())} with MI below Θ); lower N or raise Θ"
        )
    chosen = eligible[psi[eligible].argsort(stable=True)][:n]
    return chosen, psi[chosen]


def _greedy(
    tests: list[BiasTest], candidates: Tensor, n: int, reduce: Callable, current: Tensor
) -> tuple[Tensor, Tensor]:
    """Greedy Algorithm 1: remove the best candidate, re-rank on the remaining dimensions, ``n`` times;
    ``current`` is Ψ of all dimensions, then of the remaining ones."""
    kept = torch.arange(candidates.numel())
    removed, scores = [], []
    for step in range(n):
        psi = reduce(torch.stack([leave_one_out_unchecked(*(m[:, kept] for m in t[1:])) for t in tests]))
        eligible = candidates[kept] & (psi < current)
        if not eligible.any():
            raise ConfigError(
                f"Expected N = {n} dimensions to remove but after {step} removals no candidate lowers the bias "
                f"Ψ = {float(current):.6g} further; lower N or raise Θ"
            )
        best = int(torch.where(eligible, psi, torch.inf).argmin())
        removed.append(int(kept[best]))
        scores.append(psi[best])
        current = psi[best]
        kept = torch.cat([kept[:best], kept[best + 1 :]])
    return torch.tensor(removed, dtype=torch.long), torch.stack(scores)


def _effect_sizes(tests: list[BiasTest], removed: Tensor) -> Tensor:
    """Signed effect size per test with ``removed`` dimensions dropped (recomputed): ``(T,)``."""
    if removed.numel() == 0:
        return torch.stack([effect_size_unchecked(*t[1:]) for t in tests])
    kept = kept_dimensions(removed, tests[0].x.shape[1])
    return torch.stack([effect_size_unchecked(*(m[:, kept] for m in t[1:])) for t in tests])


def _checked_tests(tests: Sequence[BiasTest]) -> list[BiasTest]:
    if not tests:
        raise InputError("Expected at least one bias test but got none")
    names = [t.name for t in tests]
    if len(set(names)) != len(names):
        raise InputError(f"Expected distinct bias-test names but got {names}")
    checked = []
    for test in tests:
        try:
            checked.append(BiasTest(test.name, *checked_sets(*test[1:])))
        except InputError as err:
            raise InputError(f"Bias test {test.name!r}: {err}") from err
    dims = {t.name: t.x.shape[1] for t in checked}
    if len(set(dims.values())) > 1:
        raise InputError(f"Expected all bias tests to have one embedding dimension but got {dims}")
    return checked


def _threshold(mutual_info: Tensor, theta: float | None, theta_quantile: float | None) -> float:
    if (theta is None) == (theta_quantile is None):
        raise ConfigError(
            f"Expected exactly one of `theta` (a value) and `theta_quantile` (in (0, 1]) but got "
            f"theta={theta!r}, theta_quantile={theta_quantile!r}"
        )
    if theta is not None:
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or math.isnan(theta):
            raise ConfigError(f"Expected `theta` to be a number but got {theta!r}")
        return float(theta)
    if isinstance(theta_quantile, bool) or not isinstance(theta_quantile, (int, float)) or not 0 < theta_quantile <= 1:
        raise ConfigError(f"Expected `theta_quantile` in (0, 1] but got {theta_quantile!r}")
    return float(torch.quantile(mutual_info, float(theta_quantile)))


def worsened_tests(before: dict[str, float], after: dict[str, float]) -> list[dict[str, object]]:
    """The tests whose bias the removal made worse: :math:`|d|` raised, or the sign of :math:`d` flipped (a bias
    that now favours the other group), each ``{test, effect_size_before, effect_size_after, abs_raised,
    sign_flipped}``. The objective lowers the mean (or largest) :math:`|d|` over tests and the leave-one-out
    ranking can overshoot, so one test, or the only one, can end more biased than it started.

    Example:
        >>> [w["test"] for w in worsened_tests({"a": 0.2, "b": 0.5, "c": 0.3}, {"a": -0.1, "b": 0.7, "c": 0.1})]
        ['a', 'b']
    """
    worse = []
    for test, first in before.items():
        last = after[test]
        raised, flipped = abs(last) > abs(first), first * last < 0
        if raised or flipped:
            worse.append(
                {
                    "test": test,
                    "effect_size_before": first,
                    "effect_size_after": last,
                    "abs_raised": raised,
                    "sign_flipped": flipped,
                }
            )
    return worse

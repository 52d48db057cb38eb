r"""WEAT/SEAT (cosine) and MMBias ITM association tests as ``torchmetrics`` metrics.

The formulas live in :mod:`vlbias.metrics.functional.weat`; these classes only accumulate what they need
across batches and processes:

* :class:`WEATEffectSize`, :class:`WEATTest` keep the embeddings of the four sets X, Y, A, B (the scores
  :math:`s(w, A, B)` need all of A and B, which may be spread over ranks).
* :class:`ITMEffectSize`, :class:`ITMTest` keep one score :math:`\sigma(w, A, B)` per target, since each
  target's match probabilities against all of A and B arrive together.

All states are list states reduced with ``"cat"``; the statistics sort the scores before use and draw
their randomness from a generator seeded with ``seed`` after the sync, so 1 and N processes give the same
numbers. Call ``update`` and then ``compute``: a single batch rarely holds all four sets, so ``forward``'s
per-batch value is not meaningful here.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import ConfigError, InputError
from vlbias.metrics._list_states import joined
from vlbias.metrics.functional.bootstrap import IntervalMethod
from vlbias.metrics.functional.checks import check_bootstrap, check_embeddings, check_int, check_interval_method
from vlbias.metrics.functional.permutation import REPARTITION_EXACT_LIMIT
from vlbias.metrics.functional.weat import (
    _itm_association,
    _target_associations,
    effect_size_from_associations,
    interval_from_associations,
    mean_difference_from_associations,
    p_value_from_associations,
    statistic_from_associations,
)
from vlbias.options import DEFAULT_STATISTICS

_ROLES = ("x", "y", "a", "b")


def association_test_results(s_x: Tensor, s_y: Tensor, metric: _TestOptions) -> dict[str, Tensor]:
    """The dict :meth:`WEATTest.compute` returns, for association scores ``s_x``, ``s_y`` and the test options
    of ``metric`` (a suite that forms the scores itself, e.g. from two metrics' :meth:`~WEATEffectSize.associations`,
    gets the same statistics)."""
    p_value = torch.tensor(float("nan"), dtype=torch.float64)
    if s_x.numel() == s_y.numel() or metric.allow_unequal_sizes:
        p_value = p_value_from_associations(
            s_x, s_y, metric.n_permutations, metric.seed, metric.exact_limit, metric.allow_unequal_sizes
        )
    return {
        "effect_size": effect_size_from_associations(s_x, s_y),
        "statistic": statistic_from_associations(s_x, s_y),
        "mean_difference": mean_difference_from_associations(s_x, s_y),
        "p_value": p_value,
        "n_x": torch.tensor(s_x.numel()),
        "n_y": torch.tensor(s_y.numel()),
        "interval": interval_from_associations(
            s_x, s_y, metric.n_bootstrap, metric.confidence, metric.seed, metric.interval_method
        ),
    }


class _TestOptions:
    """The options of the permutation test and the bootstrap interval, declared and checked once: the first base of
    :class:`WEATTest`, :class:`ITMTest` and :class:`~vlbias.metrics.grounded_weat.GroundedCongruenceTest` (the
    other keyword arguments go on to the next base). Arguments: see :class:`WEATTest`."""

    def __init__(
        self,
        n_permutations: int = DEFAULT_STATISTICS.n_permutations,
        exact_limit: int = REPARTITION_EXACT_LIMIT,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        allow_unequal_sizes: bool = False,
        interval_method: IntervalMethod = DEFAULT_STATISTICS.interval_method,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_int("n_permutations", n_permutations)
        check_int("exact_limit", exact_limit, low=0)
        check_bootstrap(n_bootstrap, confidence)
        if not isinstance(allow_unequal_sizes, bool):
            raise ConfigError(
                f"Expected argument `allow_unequal_sizes` to be True or False but got {allow_unequal_sizes!r}"
            )
        check_interval_method(interval_method, "interval_method")
        self.n_permutations, self.exact_limit = n_permutations, exact_limit
        self.allow_unequal_sizes = allow_unequal_sizes
        self.interval_method = interval_method
        self.n_bootstrap, self.confidence, self.seed = n_bootstrap, confidence, seed


class WEATEffectSize(Metric):
    r"""WEAT/SEAT effect size :math:`d` of cosine associations (Ross et al. 2021, Eq. 1 and 3; MMBias Eq. 1).

    .. math::
        d = \frac{\operatorname{mean}_{x \in X} s(x, A, B) - \operatorname{mean}_{y \in Y} s(y, A, B)}
                 {\operatorname{std}_{w \in X \cup Y} s(w, A, B)}, \quad
        s(w, A, B) = \operatorname{mean}_{a} \cos(w, a) - \operatorname{mean}_{b} \cos(w, b)

    with the sample standard deviation (n − 1), as in May et al.'s SEAT code.

    As input to ``update`` (keywords; any subset of the four per call):

    - ``x``, ``y`` (:class:`~torch.Tensor`): target embeddings ``(n, d)``
    - ``a``, ``b`` (:class:`~torch.Tensor`): attribute embeddings ``(n, d)``

    As output of ``compute``: a float64 scalar tensor.

    Embeddings are stored flattened in the metric's dtype (``set_dtype`` changes it) with their width in a
    ``"max"``-reduced state: a rank that saw no item of a set then still joins the gather. The associations
    are computed in float64, so that the result does not depend on the order in which ranks' rows arrive.

    Args:
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = WEATEffectSize()
        >>> metric.update(a=torch.tensor([[1.0, 0.0]]), b=torch.tensor([[0.0, 1.0]]))
        >>> metric.update(x=torch.tensor([[1.0, 0.0], [0.9, 0.1]]), y=torch.tensor([[0.0, 1.0], [0.1, 0.9]]))
        >>> metric.compute().round(decimals=4)
        tensor(1.7287, dtype=torch.float64)
    """

    is_differentiable: bool = True
    higher_is_better: bool | None = None  # signed: the sign says which target set leans to A
    full_state_update: bool = False

    x: list[Tensor]
    y: list[Tensor]
    a: list[Tensor]
    b: list[Tensor]
    embedding_dim: Tensor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for role in _ROLES:
            self.add_state(role, default=[], dist_reduce_fx="cat")
        self.add_state("embedding_dim", default=torch.tensor(0), dist_reduce_fx="max")

    def update(
        self, x: Tensor | None = None, y: Tensor | None = None, a: Tensor | None = None, b: Tensor | None = None
    ) -> None:
        """Add embeddings ``(n, d)`` to any of the target sets ``x``, ``y`` and attribute sets ``a``, ``b``."""
        given = {
            role: embeddings for role, embeddings in zip(_ROLES, (x, y, a, b), strict=True) if embeddings is not None
        }
        if not given:
            raise InputError("Expected at least one of the arguments `x`, `y`, `a`, `b` to be given but got none")
        for role, embeddings in given.items():
            check_embeddings(role, embeddings)
            dim = int(self.embedding_dim)
            if dim and embeddings.shape[1] != dim:
                raise InputError(
                    f"Expected argument `{role}` to have embedding dimension {dim} like the earlier updates but got "
                    f"{embeddings.shape[1]}"
                )
            self.embedding_dim = torch.tensor(embeddings.shape[1], device=self.device)
            getattr(self, role).append(embeddings.to(self.dtype).flatten())

    def associations(self) -> tuple[Tensor, Tensor]:
        """:math:`s(x, A, B)` of every target in X and :math:`s(y, A, B)` of every target in Y seen so far (after a
        sync: on every rank, in the gather's order)."""
        dim = int(self.embedding_dim)
        if not dim:
            raise InputError(
                "Expected `update` to have been called with embeddings before `compute` but none were given"
            )
        # float64: the means over A and B then do not depend (beyond ~1e-16) on the order a gather put rows in
        return _target_associations(*(joined(getattr(self, role)).reshape(-1, dim).double() for role in _ROLES))

    def compute(self) -> Tensor:
        """Effect size over everything seen since the last ``reset``."""
        return effect_size_from_associations(*self.associations())


class WEATTest(_TestOptions, WEATEffectSize):
    r"""The full WEAT/SEAT test of :class:`WEATEffectSize`'s inputs: effect size, statistic, permutation
    p-value (May et al. 2019) and bootstrap interval of the effect size.

    As output of ``compute``, a dict of float64 tensors:

    - ``effect_size``: :math:`d` (Ross Eq. 3)
    - ``statistic``: :math:`s(X, Y, A, B)` (Ross Eq. 2)
    - ``mean_difference``: the numerator of :math:`d`
    - ``p_value``: one-sided permutation p-value
      (:func:`~vlbias.metrics.functional.weat.p_value_from_associations`); when :math:`|X| \ne |Y|`, NaN
      unless ``allow_unequal_sizes`` (then over re-partitions into sets of sizes :math:`|X|` and :math:`|Y|`)
    - ``n_x``, ``n_y``: the set sizes (int64)
    - ``interval``: ``[low, high]`` stratified bootstrap interval of :math:`d`, BCa or percentile
      (``interval_method``; :func:`~vlbias.metrics.functional.weat.interval_from_associations`)

    Args:
        n_permutations: random partitions when the test is not exact.
        exact_limit: test exactly when there are at most this many partitions.
        n_bootstrap: bootstrap replicates for the interval.
        confidence: coverage of the interval.
        seed: seed of the generators of the permutation test and the bootstrap.
        allow_unequal_sizes: give a p-value when :math:`|X| \ne |Y|` (re-partitions of the original sizes; the
            same test as the mean difference's, see
            :func:`~vlbias.metrics.functional.weat.p_value_from_associations`) instead of NaN.
        interval_method: ``"bca"`` or ``"percentile"`` bootstrap interval.
        kwargs: passed to :class:`torchmetrics.Metric`.
    """

    is_differentiable: bool = False

    def compute(self) -> dict[str, Tensor]:  # type: ignore[override]
        """Effect size, statistic, mean difference, p-value and interval over everything seen."""
        return association_test_results(*self.associations(), self)


class ITMEffectSize(Metric):
    r"""Effect size of MMBias Eq. 1 with image-text matching scores :math:`\sigma(w, A, B) =
    \operatorname{mean}_{a} \sigma(w, a) - \operatorname{mean}_{b} \sigma(w, b)` (fusion models: ALBEF, ViLT).

    As input to ``update``:

    - ``match_a`` (:class:`~torch.Tensor`): ``(n, |A|)`` match probabilities of ``n`` targets with every attribute in A
    - ``match_b`` (:class:`~torch.Tensor`): ``(n, |B|)`` the same for B
    - ``target`` (str): ``"x"`` or ``"y"``, the target set the ``n`` targets belong to

    As output of ``compute``: a float64 scalar tensor.

    Args:
        top_k: score each target on its ``top_k`` largest probabilities in A and in B (MMBias uses 15; see
            :func:`~vlbias.metrics.functional.weat.itm_association`); ``None`` uses all.
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = ITMEffectSize()
        >>> metric.update(torch.tensor([[0.9, 0.8], [0.7, 0.9]]), torch.tensor([[0.1, 0.2], [0.3, 0.1]]), target="x")
        >>> metric.update(torch.tensor([[0.2, 0.1], [0.3, 0.4]]), torch.tensor([[0.8, 0.6], [0.5, 0.7]]), target="y")
        >>> metric.compute().round(decimals=4)
        tensor(1.6941, dtype=torch.float64)
    """

    is_differentiable: bool = True
    higher_is_better: bool | None = None
    full_state_update: bool = False

    x_scores: list[Tensor]
    y_scores: list[Tensor]

    def __init__(self, top_k: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_int("top_k", top_k, none_allowed=True)
        self.top_k = top_k
        self.add_state("x_scores", default=[], dist_reduce_fx="cat")
        self.add_state("y_scores", default=[], dist_reduce_fx="cat")

    def update(self, match_a: Tensor, match_b: Tensor, target: Literal["x", "y"]) -> None:
        """Add the scores of ``n`` targets of set ``target`` from their match probabilities with A and B."""
        if target not in ("x", "y"):
            raise InputError(f"Expected argument `target` to be one of ('x', 'y') but got {target!r}")
        scores = _itm_association(match_a, match_b, self.top_k, names=("match_a", "match_b"))
        getattr(self, f"{target}_scores").append(scores.to(self.dtype))

    def associations(self) -> tuple[Tensor, Tensor]:
        r""":math:`\sigma(x, A, B)` of every target in X and :math:`\sigma(y, A, B)` of every target in Y seen so far."""
        scores = {"x": joined(self.x_scores), "y": joined(self.y_scores)}
        for target, values in scores.items():
            if values.numel() == 0:
                raise InputError(
                    f"Expected `update` to have been called with target='{target}' before `compute` but it was not"
                )
        return scores["x"], scores["y"]

    def compute(self) -> Tensor:
        """Effect size over everything seen since the last ``reset``."""
        return effect_size_from_associations(*self.associations())


class ITMTest(_TestOptions, ITMEffectSize):
    """The full test of :class:`ITMEffectSize`'s inputs; ``compute`` returns the dict of :class:`WEATTest`
    (``mean_difference`` is the "probabilistic difference" of MMBias Table 2).

    Args:
        top_k: see :class:`ITMEffectSize`.
        n_permutations, exact_limit, n_bootstrap, confidence, seed, allow_unequal_sizes, interval_method: see
            :class:`WEATTest`.
        kwargs: passed to :class:`torchmetrics.Metric`.
    """

    is_differentiable: bool = False

    def __init__(self, top_k: int | None = None, **kwargs: Any) -> None:
        super().__init__(top_k=top_k, **kwargs)

    def compute(self) -> dict[str, Tensor]:  # type: ignore[override]
        """Effect size, statistic, mean difference, p-value and interval over everything seen."""
        return association_test_results(*self.associations(), self)

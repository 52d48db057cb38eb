r"""Grounded-WEAT/SEAT Experiment 3 (congruent versus incongruent images) as a ``torchmetrics`` metric.

The formulas live in :mod:`vlbias.metrics.functional.grounded_weat`; this class keeps, per target, its
pair of association scores (own-group images, other-group images) in ``"cat"`` list states, so the
pairs stay aligned across batches and ranks; the functional code sorts the pairs, and draws its
randomness after the sync from a generator seeded with ``seed``, so 1 and N processes agree.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.bootstrap import IntervalMethod
from vlbias.metrics.functional.grounded_weat import (
    congruence_effect_size,
    congruence_interval,
    congruence_p_value,
    congruence_statistic,
)
from vlbias.metrics.functional.permutation import SIGN_FLIP_EXACT_LIMIT
from vlbias.metrics.weat import _TestOptions
from vlbias.options import DEFAULT_STATISTICS

_STATES = ("x_own", "x_other", "y_own", "y_other")


class GroundedCongruenceTest(_TestOptions, TypedListStates, Metric):
    r"""Ross et al. (2021, Sec. 4.3) Experiment 3: :math:`s_3 = \frac12(|\sum_x \delta_x| + |\sum_y \delta_y|)`,
    its effect size :math:`d_3 = \frac12(|d_X| + |d_Y|)`, paired sign-flip p-value and bootstrap interval.

    As input to ``update`` (keywords; the two scores of a target set always together):

    - ``x_own``, ``x_other`` (:class:`~torch.Tensor`): ``(n,)`` :math:`s(x, A_x, B_x)` and :math:`s(x, A_y, B_y)`
    - ``y_own``, ``y_other`` (:class:`~torch.Tensor`): ``(n,)`` :math:`s(y, A_y, B_y)` and :math:`s(y, A_x, B_x)`

    As output of ``compute``: ``{"effect_size", "statistic", "p_value", "interval"}`` (float64) and the
    numbers of targets ``{"n_x", "n_y"}`` (int64).

    Args:
        n_permutations: random sign vectors when the exact test is too large.
        exact_limit: largest number of sign vectors enumerated exactly.
        n_bootstrap: bootstrap replicates; confidence: interval coverage; seed: generator seed.
        interval_method: ``"bca"`` or ``"percentile"`` bootstrap interval.
        kwargs: passed to :class:`torchmetrics.Metric`.

    Example:
        >>> metric = GroundedCongruenceTest()
        >>> metric.update(x_own=torch.tensor([0.3, 0.2]), x_other=torch.tensor([0.1, 0.1]))
        >>> metric.update(x_own=torch.tensor([0.4]), x_other=torch.tensor([0.1]),
        ...               y_own=torch.tensor([0.3, 0.2, 0.4]), y_other=torch.tensor([0.1, 0.1, 0.1]))
        >>> metric.compute()["p_value"].item()
        0.0625
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False
    list_state_specs = tuple((name, torch.float64, ()) for name in _STATES)  # a rank may see no target of X or Y

    def __init__(
        self,
        n_permutations: int = DEFAULT_STATISTICS.n_permutations,
        exact_limit: int = SIGN_FLIP_EXACT_LIMIT,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        interval_method: IntervalMethod = DEFAULT_STATISTICS.interval_method,
        **kwargs: Any,
    ) -> None:
        # a paired test: its sets are never re-partitioned, so there is no allow_unequal_sizes to give
        super().__init__(
            n_permutations, exact_limit, n_bootstrap, confidence, seed, interval_method=interval_method, **kwargs
        )
        for name in _STATES:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, **scores: Tensor) -> None:
        unknown = sorted(set(scores) - set(_STATES))
        if unknown:
            raise InputError(f"Expected keyword arguments among {', '.join(_STATES)} but got {', '.join(unknown)}")
        for group in ("x", "y"):
            own, other = scores.get(f"{group}_own"), scores.get(f"{group}_other")
            if (own is None) != (other is None):
                raise InputError(f"Expected `{group}_own` and `{group}_other` together (one pair of scores per target)")
            if own is None:
                continue
            if own.ndim != 1 or own.shape != other.shape:
                raise InputError(
                    f"Expected `{group}_own` and `{group}_other` to be 1-D of the same length but got "
                    f"{tuple(own.shape)} and {tuple(other.shape)}"
                )
            getattr(self, f"{group}_own").append(own.detach().to(torch.float64))
            getattr(self, f"{group}_other").append(other.detach().to(torch.float64))

    def compute(self) -> dict[str, Tensor]:
        scores = [self.list_state(name) for name in _STATES]
        return {
            "effect_size": congruence_effect_size(*scores),
            "statistic": congruence_statistic(*scores),
            "p_value": congruence_p_value(
                *scores,
                n_permutations=self.n_permutations,
                seed=self.seed,
                exact_limit=self.exact_limit,
            ),
            "interval": congruence_interval(
                *scores,
                n_bootstrap=self.n_bootstrap,
                confidence=self.confidence,
                seed=self.seed,
                method=self.interval_method,
            ),
            "n_x": torch.tensor(scores[0].numel()),
            "n_y": torch.tensor(scores[2].numel()),
        }

"""Group gaps of text scores over parallel sets (suite :mod:`vlbias.suites.open_generation`) as a ``torchmetrics``
metric; the formulas are :mod:`vlbias.metrics.functional.group_scores`'.

Images are kept in ``"cat"`` list states with their set's index, put in set order after the sync, and resampled and
permuted from generators seeded with ``seed``: one process and N processes give the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_bootstrap, check_int, check_names
from vlbias.metrics.functional.group_scores import group_scores
from vlbias.options import DEFAULT_STATISTICS


class GroupScores(TypedListStates, Metric):
    """Per score and grouping: each value's mean score, the gap between the largest and smallest mean and each value
    against the rest, with bootstrap intervals over sets and within-set permutation p-values, Holm and
    Benjamini-Hochberg adjusted.

    ``update(scores, set_index, codes)`` takes per-image rows (shapes and codes of
    :func:`~vlbias.metrics.functional.group_scores.group_scores`); ``compute()`` returns that function's float64
    tensors.

    Args:
        score_names: the scores' names (the columns of ``scores``).
        grouping_values: each grouping's values, which the ``codes`` columns index.
        n_bootstrap: bootstrap resamples per interval.
        confidence: interval coverage.
        n_permutations: arrangements drawn per test when it is not exact.
        seed: seed of the bootstraps and tests.

    Example:
        >>> metric = GroupScores(["warmth"], {"gender": ["man", "woman"]})
        >>> metric.update(torch.tensor([[0.9], [0.1]], dtype=torch.float64), torch.tensor([0, 0]),
        ...               torch.tensor([[0], [1]]))
        >>> round(float(metric.compute()["warmth/gender/vs_rest/woman"]), 6)
        -0.8
    """

    is_differentiable = False
    higher_is_better = None  # a gap is 0 when the person does not matter; a mean score has no better side
    full_state_update = False

    def __init__(
        self,
        score_names: Sequence[str],
        grouping_values: Mapping[str, Sequence[str]],
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        n_permutations: int = DEFAULT_STATISTICS.n_permutations,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_names("score_names", score_names)
        check_bootstrap(n_bootstrap, confidence)
        check_int("n_permutations", n_permutations)
        self.score_names = tuple(score_names)
        self.grouping_values = {name: tuple(values) for name, values in grouping_values.items()}
        self.n_bootstrap, self.confidence, self.n_permutations, self.seed = (
            n_bootstrap, confidence, n_permutations, seed,
        )  # fmt: skip
        self.list_state_specs = (
            ("scores", torch.float64, (len(self.score_names),)),
            ("set_index", torch.int64, ()),
            ("codes", torch.int64, (len(self.grouping_values),)),
        )
        for name, _, _ in self.list_state_specs:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, scores: Tensor, set_index: Tensor, codes: Tensor) -> None:
        self.append_rows({"scores": scores, "set_index": set_index, "codes": codes})

    def compute(self) -> dict[str, Tensor]:
        states = {name: self.list_state(name) for name, _, _ in self.list_state_specs}
        return group_scores(
            **states, score_names=self.score_names, grouping_values=self.grouping_values,
            n_bootstrap=self.n_bootstrap, confidence=self.confidence, n_permutations=self.n_permutations,
            seed=self.seed,
        )  # fmt: skip

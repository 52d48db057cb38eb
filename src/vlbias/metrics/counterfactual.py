"""Counterfactual answers (how an answer moves across parallel images of different people) as a ``torchmetrics``
metric; the formulas are :mod:`vlbias.metrics.functional.counterfactual`'s.

Images are kept in ``"cat"`` list states with their set's index, put in set order after the sync (a set's images
arrive in one update on one rank, in order), and resampled from generators seeded with ``seed``: one process and N
processes give the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_bootstrap, check_int, check_names
from vlbias.metrics.functional.counterfactual import counterfactual_answers
from vlbias.options import DEFAULT_STATISTICS


class CounterfactualAnswers(TypedListStates, Metric):
    """Per set of parallel images: the largest change of an option's probability, the Jensen-Shannon divergence of
    the answer distributions, whether the chosen answer flips, the rate of "unclear" answers; their means over sets
    with bootstrap intervals; and each attribute's paired probability gaps per option with sign-flip p-values, Holm
    and Benjamini-Hochberg adjusted.

    ``update(probabilities, set_index, unknown_option, options, attributes)`` takes per-image rows (shapes and
    codes of :func:`~vlbias.metrics.functional.counterfactual.counterfactual_answers`, ``max_options`` columns);
    ``compute()`` returns that function's float64 tensors.

    Args:
        option_names: the option texts the ``options`` codes index.
        attribute_values: each attribute's values (sorted), which the ``attributes`` codes index.
        max_options: the most options a set has.
        n_bootstrap: bootstrap resamples per interval.
        confidence: interval coverage.
        n_permutations: random sign vectors when a sign-flip test samples.
        seed: seed of the bootstraps and tests.

    Example:
        >>> metric = CounterfactualAnswers(["yes", "no"], {"gender": ["man", "woman"]}, max_options=2)
        >>> metric.update(torch.tensor([[0.9, 0.1], [0.4, 0.6]], dtype=torch.float64), torch.tensor([0, 0]),
        ...               torch.tensor([-1, -1]), torch.tensor([[0, 1], [0, 1]]), torch.tensor([[0], [1]]))
        >>> result = metric.compute()
        >>> float(result["flip_rate"]), round(float(result["gap/gender/man-woman/yes"]), 4)
        (1.0, 0.5)
    """

    is_differentiable = False
    higher_is_better = False  # every measure is 0 when the person shown does not matter
    full_state_update = False

    def __init__(
        self,
        option_names: Sequence[str],
        attribute_values: Mapping[str, Sequence[str]],
        max_options: int,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        n_permutations: int = DEFAULT_STATISTICS.n_permutations,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_names("option_names", option_names)
        check_bootstrap(n_bootstrap, confidence)
        check_int("n_permutations", n_permutations)
        if isinstance(max_options, bool) or not isinstance(max_options, int) or max_options < 2:
            raise InputError(f"Expected argument `max_options` to be an integer of at least 2 but got {max_options!r}.")
        self.option_names = tuple(option_names)
        self.attribute_values = {name: tuple(values) for name, values in attribute_values.items()}
        self.max_options, self.n_attributes = max_options, len(self.attribute_values)
        self.n_bootstrap, self.confidence, self.n_permutations, self.seed = (
            n_bootstrap, confidence, n_permutations, seed,
        )  # fmt: skip
        self.list_state_specs = (
            ("probabilities", torch.float64, (max_options,)),
            ("set_index", torch.int64, ()),
            ("unknown_option", torch.int64, ()),
            ("options", torch.int64, (max_options,)),
            ("attributes", torch.int64, (self.n_attributes,)),
        )
        for name, _, _ in self.list_state_specs:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(
        self, probabilities: Tensor, set_index: Tensor, unknown_option: Tensor, options: Tensor, attributes: Tensor
    ) -> None:
        self.append_rows(
            {
                "probabilities": probabilities,
                "set_index": set_index,
                "unknown_option": unknown_option,
                "options": options,
                "attributes": attributes,
            }  # fmt: skip
        )

    def compute(self) -> dict[str, Tensor]:
        states = {name: self.list_state(name) for name, _, _ in self.list_state_specs}
        return counterfactual_answers(
            **states, option_names=self.option_names, attribute_values=self.attribute_values,
            n_bootstrap=self.n_bootstrap, confidence=self.confidence, n_permutations=self.n_permutations,
            seed=self.seed,
        )  # fmt: skip

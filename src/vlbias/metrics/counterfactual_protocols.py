"""VHELM's "unclear" rate per group and Girrbach et al.'s P(yes) gap per trait as a ``torchmetrics`` metric; the
formulas are :mod:`vlbias.metrics.functional.counterfactual_protocols`'.

Images are kept in ``"cat"`` list states with their set's index; the bootstraps and tests draw from generators seeded
with ``seed`` after the sync: one process and N processes give the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from vlbias.metrics.counterfactual import CounterfactualAnswers
from vlbias.metrics.functional.checks import check_names
from vlbias.metrics.functional.counterfactual_protocols import counterfactual_protocols
from vlbias.options import DEFAULT_STATISTICS


class CounterfactualProtocols(CounterfactualAnswers):
    """VHELM's rate of "unclear" answers per attribute value and Girrbach et al.'s P(yes) gap per trait and
    attribute pair, with bootstrap intervals, paired sign-flip p-values and Holm / Benjamini-Hochberg adjustment
    over traits.

    ``update(probabilities, set_index, unknown_option, options, attributes, question)`` takes per-image rows (shapes
    and codes of :func:`~vlbias.metrics.functional.counterfactual_protocols.counterfactual_protocols`,
    ``max_options`` columns); ``compute()`` returns that function's float64 tensors.

    Args:
        option_names: the option texts the ``options`` codes index.
        attribute_values: each attribute's values (sorted), which the ``attributes`` codes index.
        question_names: the questions (traits) the ``question`` codes index.
        max_options: the most options a set has.
        n_bootstrap: bootstrap resamples per interval.
        confidence: interval coverage.
        n_permutations: random sign vectors when a sign-flip test samples.
        seed: seed of the bootstraps and tests.

    Example:
        >>> metric = CounterfactualProtocols(["yes", "no"], {"gender": ["man", "woman"]}, ["Is this person kind?"], 2)
        >>> metric.update(torch.tensor([[0.2, 0.6], [0.6, 0.2]], dtype=torch.float64), torch.tensor([0, 0]),
        ...               torch.tensor([-1, -1]), torch.tensor([[0, 1], [0, 1]]), torch.tensor([[0], [1]]),
        ...               torch.tensor([0, 0]))
        >>> round(float(metric.compute()["yes_gap/gender/man-woman/Is this person kind?"]), 4)
        -0.5
    """

    is_differentiable = False
    higher_is_better = None  # an unclear rate is good or bad by the question; a gap is best at 0
    full_state_update = False

    def __init__(
        self,
        option_names: Sequence[str],
        attribute_values: Mapping[str, Sequence[str]],
        question_names: Sequence[str],
        max_options: int,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        n_permutations: int = DEFAULT_STATISTICS.n_permutations,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(option_names, attribute_values, max_options, n_bootstrap, confidence, n_permutations, seed,
                         **kwargs)  # fmt: skip
        check_names("question_names", question_names)
        self.question_names = tuple(question_names)
        self.list_state_specs = (*self.list_state_specs, ("question", torch.int64, ()))
        self.add_state("question", default=[], dist_reduce_fx="cat")

    def update(  # type: ignore[override]  # the question of each image besides CounterfactualAnswers' rows
        self,
        probabilities: Tensor,
        set_index: Tensor,
        unknown_option: Tensor,
        options: Tensor,
        attributes: Tensor,
        question: Tensor,
    ) -> None:
        self.append_rows(
            {
                "probabilities": probabilities,
                "set_index": set_index,
                "unknown_option": unknown_option,
                "options": options,
                "attributes": attributes,
                "question": question,
            }  # fmt: skip
        )

    def compute(self) -> dict[str, Tensor]:
        states = {name: self.list_state(name) for name, _, _ in self.list_state_specs}
        return counterfactual_protocols(
            **states, option_names=self.option_names, attribute_values=self.attribute_values,
            question_names=self.question_names, n_bootstrap=self.n_bootstrap, confidence=self.confidence,
            n_permutations=self.n_permutations, seed=self.seed,
        )  # fmt: skip

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
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_bootstrap, check_int, check_names
from vlbias.metrics.functional.counterfactual_protocols import counterfactual_protocols
from vlbias.options import DEFAULT_STATISTICS


class CounterfactualProtocols(TypedListStates, Metric):
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
        super().__init__(**kwargs)
        check_names("option_names", option_names)
        check_names("question_names", question_names)
        check_bootstrap(n_bootstrap, confidence)
        check_int("n_permutations", n_permutations)
        if isinstance(max_options, bool) or not isinstance(max_options, int) or max_options < 2:
            raise InputError(f"Expected argument `max_options` to be an integer of at least 2 but got {max_options!r}.")
        self.option_names, self.question_names = tuple(option_names), tuple(question_names)
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
            ("question", torch.int64, ()),
        )
        for name, _, _ in self.list_state_specs:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(
        self,
        probabilities: Tensor,
        set_index: Tensor,
        unknown_option: Tensor,
        options: Tensor,
        attributes: Tensor,
        question: Tensor,
    ) -> None:
        rows = len(set_index)
        given = {"probabilities": probabilities, "set_index": set_index, "unknown_option": unknown_option,
                 "options": options, "attributes": attributes, "question": question}  # fmt: skip
        for name, dtype, shape in self.list_state_specs:
            values = torch.as_tensor(given[name])
            floats = name == "probabilities"
            if tuple(values.shape) != (rows, *shape) or floats != values.is_floating_point():
                raise InputError(
                    f"Expected argument `{name}` of shape {(rows, *shape)} ({'floats' if floats else 'integers'}) "
                    f"but got {values.dtype} {tuple(values.shape)}."
                )
            getattr(self, name).append(values.to(dtype))

    def compute(self) -> dict[str, Tensor]:
        states = {name: self.list_state(name) for name, _, _ in self.list_state_specs}
        return counterfactual_protocols(
            **states, option_names=self.option_names, attribute_values=self.attribute_values,
            question_names=self.question_names, n_bootstrap=self.n_bootstrap, confidence=self.confidence,
            n_permutations=self.n_permutations, seed=self.seed,
        )  # fmt: skip

"""BBQ's bias scores (Parrish et al., 2022) as a ``torchmetrics`` metric, overall and per category; the formulas are
:mod:`vlbias.metrics.functional.bbq`'s.

Items are kept in ``"cat"`` list states with their index, put in index order after the sync, and resampled from a
generator seeded with ``seed``: one process and N processes give the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.errors import InputError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.bbq import bbq_intervals, bbq_scores, check_bbq_items
from vlbias.metrics.functional.checks import check_bootstrap, check_names
from vlbias.options import DEFAULT_STATISTICS


class BBQScores(TypedListStates, Metric):
    """Accuracy in ambiguous and disambiguated contexts, the rate of "unknown" answers, and BBQ's bias scores
    :math:`s_{\\text{AMB}}` and :math:`s_{\\text{DIS}}`, overall and per category, with bootstrap intervals.

    ``update(chosen, correct, ambiguous, category, index)`` takes per-item answer kinds ``(N,)`` (codes
    :data:`~vlbias.metrics.functional.bbq.BIASED`, ``COUNTER``, ``UNKNOWN``) of the chosen and the right answer,
    whether the context is ambiguous, the category index into ``categories``, and the item's index (its place
    among all items, which orders them after a sync).

    ``compute()`` returns float64 tensors: each score of :data:`~vlbias.metrics.functional.bbq.SCORES` and
    ``n_ambiguous``, ``n_disambiguated``, overall and for each category ``c`` that had items as ``<name>/c``, each
    score with ``<name>/interval``; NaN where a score is undefined.

    Args:
        categories: names of the category indices.
        n_bootstrap: bootstrap resamples per interval.
        confidence: interval coverage.
        seed: seed of the bootstrap.

    Example:
        >>> metric = BBQScores(["gender"], n_bootstrap=100, confidence=0.95)
        >>> metric.update(torch.tensor([0, 1, 2]), torch.tensor([0, 0, 2]), torch.tensor([False, False, True]),
        ...               torch.tensor([0, 0, 0]), torch.tensor([0, 1, 2]))
        >>> result = metric.compute()
        >>> float(result["accuracy_disambiguated"]), float(result["bias_disambiguated/gender"])
        (0.5, 0.0)
    """

    is_differentiable = False
    higher_is_better = None  # accuracy: higher is better; |bias|: lower is better
    full_state_update = False
    list_state_specs = tuple(
        (name, dtype, ())
        for name, dtype in (
            ("chosen", torch.int64),
            ("correct", torch.int64),
            ("ambiguous", torch.bool),
            ("category", torch.int64),
            ("index", torch.int64),
        )
    )

    def __init__(
        self,
        categories: Sequence[str],
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_names("categories", categories)
        check_bootstrap(n_bootstrap, confidence)
        self.categories = tuple(categories)
        self.n_bootstrap, self.confidence, self.seed = n_bootstrap, confidence, seed
        for name, _, _ in self.list_state_specs:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, chosen: Tensor, correct: Tensor, ambiguous: Tensor, category: Tensor, index: Tensor) -> None:
        chosen, correct, ambiguous = check_bbq_items(chosen, correct, ambiguous)
        category, index = torch.as_tensor(category), torch.as_tensor(index)
        for name, values in (("category", category), ("index", index)):
            if values.shape != chosen.shape or values.is_floating_point():
                raise InputError(
                    f"Expected argument `{name}` to be integers of shape {tuple(chosen.shape)} but got "
                    f"{values.dtype} {tuple(values.shape)}."
                )
        if len(category) and (category.min() < 0 or category.max() >= len(self.categories)):
            raise InputError(
                f"Expected argument `category` in [0, {len(self.categories)}) (indices into {self.categories}) but got "
                f"{category.unique().tolist()}."
            )
        for name, values in (("chosen", chosen), ("correct", correct), ("ambiguous", ambiguous),
                             ("category", category.long()), ("index", index.long())):  # fmt: skip
            getattr(self, name).append(values)

    def compute(self) -> dict[str, Tensor]:
        order = self.list_state("index").argsort()
        chosen, correct, ambiguous, category = (
            self.list_state(name)[order] for name in ("chosen", "correct", "ambiguous", "category")
        )
        results = self._scores(chosen, correct, ambiguous.bool(), "", self.seed)
        for number, name in enumerate(self.categories):
            members = category == number
            if members.any():
                results |= self._scores(chosen[members], correct[members], ambiguous[members].bool(), f"/{name}",
                                        self.seed + 1 + number)  # fmt: skip
        return results

    def _scores(self, chosen: Tensor, correct: Tensor, ambiguous: Tensor, suffix: str, seed: int) -> dict:
        generator = torch.Generator().manual_seed(seed)
        intervals = bbq_intervals(chosen, correct, ambiguous, n_bootstrap=self.n_bootstrap,
                                  confidence=self.confidence, generator=generator)  # fmt: skip
        scores = bbq_scores(chosen, correct, ambiguous)
        return {f"{name}{suffix}": value for name, value in scores.items()} | {
            f"{name}{suffix}/interval": value for name, value in intervals.items()
        }

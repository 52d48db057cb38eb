r"""Entity-association scores of Srinivasan & Bisk (2022), Eq. 2-5, as ``torchmetrics`` metrics, for image
sets spread over batches and processes. The formulas live in
:mod:`vlbias.metrics.functional.entity_association`.

* :class:`LanguageAssociation` keeps per-entity sums of ``log P(E|g, I) - log P(E|p, I)`` and
  image counts (``"sum"`` states): their ratio is :math:`S_L(E, g)`.
* :class:`VisualAssociation` keeps every image's ``log P(E|p, I)`` (``"cat"`` list states), since
  :math:`\ln \hat P_{VL}(E|I_g)` is a log-mean-exp, not a sum, plus per-entity sums of the
  no-image normaliser.
* :class:`PretrainingAssociation` keeps per-entity sums of ``log P_VL(E|g) - log P_L(E|g)``: :math:`S_{PT}(E, g)`.
* :class:`BiasScore` is :math:`B(E) = S(E, f) - S(E, m)` of two of the above, one per group; it keeps no state.
* :class:`LanguageBiasInterval` and :class:`VisualBiasInterval` keep every image's scores with its place in a
  fixed order (``"cat"`` list states) and give percentile bootstrap intervals of :math:`B_L(E)` and
  :math:`B_V(E)`, seeded with ``seed`` after the sync, so 1 and N processes give the same interval.

All return one score (or interval) per entity, NaN for an entity that received no row (a score is a 0-d
tensor when ``num_entities`` is 1: torchmetrics squeezes single-element results).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.metric import CompositionalMetric

from vlbias.errors import ConfigError, InputError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.checks import check_bootstrap, check_int
from vlbias.metrics.functional.entity_association import (
    _check_entity_batch,
    _difference_sums,
    _per_entity_mean,
    _visual_compute,
    bias_score,
    language_bias_interval,
    visual_bias_interval,
)
from vlbias.options import DEFAULT_STATISTICS


class _PerEntityMean(Metric):
    """Per-entity sums and counts of a log-probability difference (summed over ranks); ``compute`` is their
    mean per entity, NaN for an entity without a row. Subclasses name the two inputs in ``update``."""

    is_differentiable = False
    higher_is_better = None
    full_state_update = False

    def __init__(self, num_entities: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_int("num_entities", num_entities)
        self.num_entities = num_entities
        self.add_state("total", torch.zeros(num_entities, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", torch.zeros(num_entities, dtype=torch.float64), dist_reduce_fx="sum")

    def _add(self, entity: Tensor, log_p: Tensor, log_p_reference: Tensor, names: tuple[str, str]) -> None:
        total, count = _difference_sums(entity, log_p, log_p_reference, self.num_entities, names)
        self.total += total
        self.count += count

    def compute(self) -> Tensor:
        return _per_entity_mean(self.total, self.count)


class LanguageAssociation(_PerEntityMean):
    r""":math:`S_L(E, g) = \mathbb{E}_{I \sim I_E}[\ln P_{VL}(E|g, I) - \ln P_{VL}(E|p, I)]` (Eq. 3)
    per entity.

    ``update`` takes, per image: ``entity`` (N,) int index, ``log_p_agent`` (N,) with the gendered
    agent in the caption, ``log_p_neutral`` (N,) with *person*. ``compute`` returns (num_entities,)
    float64.

    Example:
        >>> metric = LanguageAssociation(num_entities=2)
        >>> metric.update(torch.tensor([0, 0, 1]), torch.log(torch.tensor([0.4, 0.1, 0.3])), torch.log(torch.tensor([0.2, 0.1, 0.3])))
        >>> metric.compute()
        tensor([0.3466, 0.0000], dtype=torch.float64)
    """

    def update(self, entity: Tensor, log_p_agent: Tensor, log_p_neutral: Tensor) -> None:
        self._add(entity, log_p_agent, log_p_neutral, ("log_p_agent", "log_p_neutral"))


class VisualAssociation(TypedListStates, Metric):
    r""":math:`S_V(E, g) = \ln \frac{1}{|I_g|} \sum_{I \in I_g} P_{VL}(E|p, I) - \ln P_{VL}(E|p)`
    (Eq. 4 with Eq. 2) per entity.

    ``update`` takes, per image of group ``g``: ``entity`` (N,) int index, ``log_p_image`` (N,)
    (neutral caption with the image), ``log_p_no_image`` (N,) (the same caption with the model's
    "no image"; repeated per row, its per-entity mean is used). ``compute`` returns
    (num_entities,) float64.

    Example:
        >>> metric = VisualAssociation(num_entities=2)
        >>> metric.update(torch.tensor([0, 0]), torch.log(torch.tensor([0.3, 0.1])), torch.log(torch.tensor([0.1, 0.1])))
        >>> metric.compute()  # mean probability 0.2 against 0.1: ln 2; entity 1 had no image
        tensor([0.6931,    nan], dtype=torch.float64)
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False
    list_state_specs = (
        ("entity", torch.int64, ()),
        ("log_p_image", torch.float64, ()),
        ("log_p_no_image", torch.float64, ()),
    )

    def __init__(self, num_entities: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_int("num_entities", num_entities)
        self.num_entities = num_entities
        self.add_state("entity", [], dist_reduce_fx="cat")
        self.add_state("log_p_image", [], dist_reduce_fx="cat")
        self.add_state("log_p_no_image", [], dist_reduce_fx="cat")

    def update(self, entity: Tensor, log_p_image: Tensor, log_p_no_image: Tensor) -> None:
        _check_entity_batch(entity, (log_p_image, log_p_no_image), ("log_p_image", "log_p_no_image"), self.num_entities)
        self.entity.append(entity.long())
        self.log_p_image.append(log_p_image.double())
        self.log_p_no_image.append(log_p_no_image.double())

    def compute(self) -> Tensor:
        states = (self.list_state(name) for name, _, _ in self.list_state_specs)  # NaN for every entity if empty
        return _visual_compute(*states, self.num_entities)


class PretrainingAssociation(_PerEntityMean):
    r""":math:`S_{PT}(E, g) = \ln P_{VL}(E|g) - \ln P_L(E|g)` (Eq. 2 with the normaliser of Table 1, row 1)
    per entity: the functional :func:`~vlbias.metrics.functional.entity_association.pretraining_association`,
    averaged over an entity's rows (one row per entity and group in the paper).

    ``update`` takes ``entity`` (N,) int index, ``log_p_vl`` (N,) of the vision-language model without an image
    and ``log_p_l`` (N,) of the text-only model, both with the agent of group ``g`` in the caption. ``compute``
    returns (num_entities,) float64, NaN for an entity without a row.

    Example:
        >>> metric = PretrainingAssociation(num_entities=2)
        >>> metric.update(torch.tensor([1]), torch.log(torch.tensor([0.2])), torch.log(torch.tensor([0.1])))
        >>> metric.compute()
        tensor([   nan, 0.6931], dtype=torch.float64)
    """

    def update(self, entity: Tensor, log_p_vl: Tensor, log_p_l: Tensor) -> None:
        self._add(entity, log_p_vl, log_p_l, ("log_p_vl", "log_p_l"))


class BiasScore(CompositionalMetric):
    r""":math:`B(E) = S(E, f) - S(E, m)` (Eq. 5) per entity: the functional
    :func:`~vlbias.metrics.functional.entity_association.bias_score` of the ``compute`` of two association
    metrics, one per group (e.g. two :class:`LanguageAssociation`, one fed the captions with the female agent,
    one with the male). It keeps no state: ``first`` and ``second`` are updated (and synced) as themselves.

    Example:
        >>> female, male = PretrainingAssociation(num_entities=1), PretrainingAssociation(num_entities=1)
        >>> female.update(torch.tensor([0]), torch.log(torch.tensor([0.2])), torch.log(torch.tensor([0.1])))
        >>> male.update(torch.tensor([0]), torch.log(torch.tensor([0.1])), torch.log(torch.tensor([0.1])))
        >>> BiasScore(female, male).compute()  # ln 2 - 0
        tensor(0.6931, dtype=torch.float64)
    """

    def __init__(self, first: Metric, second: Metric) -> None:
        super().__init__(bias_score, first, second)

    def update(self, *args: Any, **kwargs: Any) -> None:
        raise ConfigError("BiasScore has no rows of its own: update its two association metrics, one per group.")


def _check_order(order: Tensor, entity: Tensor) -> None:
    if order.dtype not in (torch.int32, torch.int64) or order.shape != entity.shape:
        raise InputError(
            f"Expected argument `order` to be an integer tensor shaped like `entity` {tuple(entity.shape)} but got {order.dtype} of shape {tuple(order.shape)}."
        )


#: The list states every per-image interval starts with: each row's place in a fixed order, and its entity.
_ORDERED_ROWS = (("order", torch.int64, ()), ("entity", torch.int64, ()))


class _BootstrapInterval(TypedListStates, Metric):
    """Per-image rows kept in ``"cat"`` list states with their ``order``; ``compute`` gives one percentile
    bootstrap interval per entity, NaN for an entity whose interval needs rows it did not get."""

    is_differentiable = False
    higher_is_better = None
    full_state_update = False

    def __init__(
        self,
        num_entities: int,
        n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
        confidence: float = DEFAULT_STATISTICS.confidence,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_int("num_entities", num_entities)
        check_bootstrap(n_bootstrap, confidence)
        self.num_entities, self.n_bootstrap, self.confidence, self.seed = num_entities, n_bootstrap, confidence, seed
        for name, _, _ in self.list_state_specs:
            self.add_state(name, [], dist_reduce_fx="cat")

    def _append(self, order: Tensor, entity: Tensor, *values: Tensor) -> None:
        """Append one batch's ``order``, ``entity`` and values to the list states, in the dtypes of their specs."""
        _check_order(order, entity)
        for (name, dtype, _), rows in zip(self.list_state_specs, (order, entity, *values), strict=True):
            getattr(self, name).append(rows.to(dtype))

    @abstractmethod
    def _entity_interval(self, *values: Tensor) -> Tensor | None:
        """The interval of one entity from its rows of the value states (in ``order``); None when it has none."""

    def compute(self) -> Tensor:
        """``(num_entities, 2)`` float64 ``[low, high]``: each entity's rows put in ``order``, then
        :meth:`_entity_interval`; NaN for an entity without an interval."""
        intervals = torch.full((self.num_entities, 2), float("nan"), dtype=torch.float64)
        order, entity, *values = (self.list_state(name) for name, _, _ in self.list_state_specs)
        ranked = order.argsort(stable=True)
        entity, values = entity[ranked], [state[ranked] for state in values]
        for index in entity.unique().tolist():
            interval = self._entity_interval(*(state[entity == index] for state in values))
            if interval is not None:
                intervals[index] = interval
        return intervals


class LanguageBiasInterval(_BootstrapInterval):
    r"""Percentile bootstrap interval of :math:`B_L(E) = \mathbb{E}_{I \sim I_E}[\ln P_{VL}(E|f, I) - \ln P_{VL}(E|m, I)]`
    (Eq. 3 and 5) per entity: the functional
    :func:`~vlbias.metrics.functional.entity_association.language_bias_interval` of each entity's images.

    ``update`` takes, per image of ``I_E``: ``order`` (N,) int, the row's place in a fixed order (e.g. the
    stimulus index), ``entity`` (N,) int index, ``log_p_first`` and ``log_p_second`` (N,), the caption with
    the first / second group's agent. The bootstrap resamples each entity's rows in ``order``, so the interval
    does not depend on which process saw which row. ``compute`` returns (num_entities, 2) float64
    ``[low, high]``, NaN for an entity without an image.

    Example:
        >>> metric = LanguageBiasInterval(num_entities=2, n_bootstrap=10)
        >>> metric.update(torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([-1.0, -1.0]), torch.tensor([-2.0, -2.0]))
        >>> metric.compute()
        tensor([[1., 1.],
                [nan, nan]], dtype=torch.float64)
    """

    list_state_specs = (*_ORDERED_ROWS, ("log_p_first", torch.float64, ()), ("log_p_second", torch.float64, ()))

    def update(self, order: Tensor, entity: Tensor, log_p_first: Tensor, log_p_second: Tensor) -> None:
        _check_entity_batch(entity, (log_p_first, log_p_second), ("log_p_first", "log_p_second"), self.num_entities)
        self._append(order, entity, log_p_first, log_p_second)

    def _entity_interval(self, first: Tensor, second: Tensor) -> Tensor:
        return language_bias_interval(first, second, self.n_bootstrap, self.confidence, self.seed)


class VisualBiasInterval(_BootstrapInterval):
    r"""Percentile bootstrap interval of :math:`B_V(E) = \ln \hat P_{VL}(E|I_f) - \ln \hat P_{VL}(E|I_m)`
    (Eq. 4 and 5) per entity: the functional
    :func:`~vlbias.metrics.functional.entity_association.visual_bias_interval` of each entity's images of
    ``I_f`` and ``I_m``.

    ``update`` takes, per image: ``order`` (N,) int, the row's place in a fixed order (as in
    :class:`LanguageBiasInterval`), ``entity`` (N,) int index, ``group`` (N,) int, 0 for an image of the first
    group and 1 for the second, ``log_p_image`` (N,) of the neutral caption with the image. ``compute`` returns
    (num_entities, 2) float64 ``[low, high]``, NaN for an entity lacking images of either group.

    Example:
        >>> metric = VisualBiasInterval(num_entities=1, n_bootstrap=10)
        >>> metric.update(torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0]), torch.tensor([0, 1, 1]), torch.tensor([-1.0, -2.0, -2.0]))
        >>> metric.compute()
        tensor([[1., 1.]], dtype=torch.float64)
    """

    list_state_specs = (*_ORDERED_ROWS, ("group", torch.int64, ()), ("log_p_image", torch.float64, ()))

    def update(self, order: Tensor, entity: Tensor, group: Tensor, log_p_image: Tensor) -> None:
        _check_entity_batch(entity, (group, log_p_image), ("group", "log_p_image"), self.num_entities)
        if group.dtype not in (torch.int32, torch.int64) or (
            group.numel() and not bool(((group == 0) | (group == 1)).all())
        ):
            raise InputError(
                f"Expected argument `group` to hold 0 (first group) or 1 (second group) but got {group.tolist()}."
            )
        self._append(order, entity, group, log_p_image)

    def _entity_interval(self, group: Tensor, values: Tensor) -> Tensor | None:
        first, second = values[group == 0], values[group == 1]
        if not (len(first) and len(second)):
            return None
        return visual_bias_interval(first, second, self.n_bootstrap, self.confidence, self.seed)

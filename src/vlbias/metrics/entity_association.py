r"""Image-averaged entity-association scores (Srinivasan & Bisk, 2022, Eq. 3 and 4) as ``torchmetrics``
metrics, for image sets spread over batches and processes. The formulas live in
:mod:`vlbias.metrics.functional.entity_association`.

* :class:`LanguageAssociation` keeps per-entity sums of ``log P(E|g, I) - log P(E|p, I)`` and
  image counts (``"sum"`` states): their ratio is :math:`S_L(E, g)`.
* :class:`VisualAssociation` keeps every image's ``log P(E|p, I)`` (``"cat"`` list states), since
  :math:`\ln \hat P_{VL}(E|I_g)` is a log-mean-exp, not a sum, plus per-entity sums of the
  no-image normaliser.

Both return one score per entity, NaN for an entity that received no image (a 0-d tensor when
``num_entities`` is 1: torchmetrics squeezes single-element results).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from vlbias.errors import ConfigError
from vlbias.metrics._list_states import TypedListStates
from vlbias.metrics.functional.entity_association import (
    _check_entity_batch,
    _language_compute,
    _language_update,
    _visual_compute,
)


def _check_num_entities(num_entities: int) -> None:
    if not isinstance(num_entities, int) or isinstance(num_entities, bool) or num_entities < 1:
        raise ConfigError(f"Expected argument `num_entities` to be a positive integer but got {num_entities!r}.")


class LanguageAssociation(Metric):
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

    is_differentiable = False
    higher_is_better = None
    full_state_update = False

    def __init__(self, num_entities: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_num_entities(num_entities)
        self.num_entities = num_entities
        self.add_state("total", torch.zeros(num_entities, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", torch.zeros(num_entities, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, entity: Tensor, log_p_agent: Tensor, log_p_neutral: Tensor) -> None:
        total, count = _language_update(entity, log_p_agent, log_p_neutral, self.num_entities)
        self.total += total
        self.count += count

    def compute(self) -> Tensor:
        return _language_compute(self.total, self.count)


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
    list_state_specs = (("entity", torch.int64, ()), ("log_p_image", torch.float64, ()), ("log_p_no_image", torch.float64, ()))

    def __init__(self, num_entities: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_num_entities(num_entities)
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
        joined = [dim_zero_cat(s) if not isinstance(s, Tensor) and s else s for s in (self.entity, self.log_p_image, self.log_p_no_image)]
        if isinstance(joined[0], list):  # nothing seen
            return torch.full((self.num_entities,), float("nan"), dtype=torch.float64)
        return _visual_compute(*joined, self.num_entities)

r"""MMBias pruning (Janghorbani & de Melo, 2023, Sec. 6, Algorithm 1) as a debiaser: the embedding dimensions whose
removal lowers the cross-modal bias most, among those redundant for classification, removed.

The data make one cross-modal test of MMBias Eq. 1, :math:`d(X^I, Y^I, A^T, B^T)`: the target images :math:`X, Y` are
the reference images of the two attribute groups (``reference_labels``, in the order they first appear), the
attribute texts :math:`A, B` the two values of ``attribute_prompts`` (in the mapping's order); the labels of
Algorithm 1's mutual information are the images' classes (``reference_classes``). The choice is
:func:`~vlbias.mitigation.pruning.prune_dimensions` (Algorithm 1, ``strategy="ranked"``, or its greedy variant; the
module :mod:`vlbias.mitigation.pruning` says how its pseudo-code is read), with :math:`N`, :math:`\Theta` and the
objective as options; the removed dimensions leave image and text embeddings alike
(:mod:`vlbias.mitigation.dimension_removal`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_embeddings
from vlbias.mitigation.debiaser import FitData
from vlbias.mitigation.dimension_removal import DimensionRemoval, RemovalOptions, group_codes
from vlbias.mitigation.pruning import OBJECTIVES, BiasTest, prune_dimensions
from vlbias.mitigation.removal_count import MutualInformationThreshold


@dataclass(frozen=True, kw_only=True)
class MMBiasPruningOptions(RemovalOptions, MutualInformationThreshold):
    """Θ is ``theta`` or ``theta_quantile`` (:class:`vlbias.mitigation.removal_count.MutualInformationThreshold`).

    Args:
    strategy: ranked (Algorithm 1, one leave-one-out ranking) or greedy (re-ranked after each removal).
    objective: what the choice minimises over the tests: mean_abs or max_abs of the effect sizes.
    """

    strategy: Literal["ranked", "greedy"] = "ranked"
    objective: Literal["mean_abs", "max_abs"] = "mean_abs"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.strategy not in ("ranked", "greedy"):
            raise ConfigError(f"Expected `strategy` to be one of ('ranked', 'greedy') but got {self.strategy!r}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"Expected `objective` to be one of {tuple(OBJECTIVES)} but got {self.objective!r}")
        self._choose_theta(self.strategy)


class MMBiasPruning(DimensionRemoval):
    """MMBias Algorithm 1 on the test the reference images and attribute prompts make (module docstring)."""

    name = "mmbias_pruning"
    NEEDS = ("reference_images", "reference_labels", "reference_classes", "attribute_prompts")
    OPTIONS = MMBiasPruningOptions

    def _removed(self, data: FitData) -> tuple[int, Tensor]:
        images, labels = data.labelled_references()
        groups = group_codes("reference_labels", labels, images.shape[0])
        if int(groups.max()) != 1:
            raise InputError(
                f"Expected reference labels of exactly two groups (MMBias's target sets X and Y) but got "
                f"{int(groups.max()) + 1}: {list(dict.fromkeys(map(str, labels)))}"
            )
        if len(data.attribute_prompts) != 2:
            raise InputError(
                f"Expected attribute prompts of exactly two values (MMBias's attribute sets A and B) but got "
                f"{list(map(str, data.attribute_prompts))}"
            )
        (a_name, a), (b_name, b) = data.attribute_prompts.items()
        a = check_embeddings(f"attribute_prompts[{a_name!r}]", a)
        b = check_embeddings(f"attribute_prompts[{b_name!r}]", b)
        test = BiasTest("reference", images[groups == 0], images[groups == 1], a, b)
        options = self.options
        result = prune_dimensions(
            [test],
            images,
            group_codes("reference_classes", data.reference_classes, images.shape[0]),
            options.count(images.shape[1]),
            strategy=options.strategy,
            theta=options.theta,
            theta_quantile=options.theta_quantile,
            objective=options.objective,
            seed=options.seed,
        )
        return images.shape[1], torch.tensor(result.removed, dtype=torch.long)

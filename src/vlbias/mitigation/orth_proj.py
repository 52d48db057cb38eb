r"""Orth-Proj: text embeddings projected away from the span of attribute prompts (Chuang, Jampani, Li, Torralba &
Jegelka, 2023, "Debiasing Vision-Language Models via Biased Prompts", Sec. 3.1, Eq. 3-4).

The prompts that name the attribute's values ("a photo of a man", "a photo of a woman") are the columns of
:math:`V`; every text embedding is projected onto the orthogonal complement of their span,
:math:`z' = P z / |P z|` with :math:`P = I - V V^{+}` (:func:`vlbias.mitigation.projection.orthogonal_projection`,
computed from the SVD so a rank-deficient span stays exact). Image embeddings are unchanged: the method debiases
the text side of a zero-shot classifier or a retrieval query.

Example:
    >>> import torch
    >>> prompts = {"man": torch.tensor([[1.0, 1.0, 0.0]]), "woman": torch.tensor([[1.0, 1.0, 0.0]])}
    >>> debiaser = OrthProj().fit(FitData(attribute_prompts=prompts))
    >>> debiaser.transform_texts(torch.tensor([[1.0, 0.0, 1.0]]))
    tensor([[ 0.4082, -0.4082,  0.8165]])
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from vlbias.errors import ConfigError
from vlbias.mitigation.debiaser import Debiaser, DebiaserOptions, FitData, Modality, stacked_prompts
from vlbias.mitigation.projection import orthogonal_projection


@dataclass(frozen=True)
class OrthProjOptions(DebiaserOptions):
    """Args:
    rtol: singular values of the prompt matrix below ``rtol`` times the largest count as zero (default: ``D``
        times the dtype's machine epsilon, as ``torch.linalg.pinv``).
    """

    rtol: float | None = None

    def __post_init__(self) -> None:
        if self.rtol is not None and not 0 <= self.rtol < 1:
            raise ConfigError(f"Expected `rtol` in [0, 1) but got {self.rtol!r}")


class OrthProj(Debiaser):
    """Chuang et al. (2023) Eq. 3-4: text embeddings projected onto the orthogonal complement of the attribute
    prompts' span; linear (:meth:`linear_map` gives :math:`P`)."""

    name = "orth_proj"
    NEEDS = ("attribute_prompts",)
    MODIFIES = frozenset({"text"})
    OPTIONS = OrthProjOptions

    def _fit(self, data: FitData) -> None:
        self._keep("projection", orthogonal_projection(stacked_prompts(data.attribute_prompts), self.options.rtol))

    def linear_map(self, modality: Modality) -> Tensor | None:
        return self.fitted_state()["projection"] if modality in self.MODIFIES else None

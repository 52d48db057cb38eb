r"""Debiasers that remove embedding dimensions (:class:`DimensionRemoval`): CLIP-clip
(:mod:`vlbias.mitigation.clip_clip`) and MMBias pruning (:mod:`vlbias.mitigation.mmbias_pruning`), the choices of
:mod:`vlbias.mitigation.pruning` under the debiaser interface.

Removing the dimensions :math:`R` of :math:`D` keeps the others, :math:`K`, in ascending order: every image and text
embedding becomes :math:`z_K / |z_K|`, the linear map :math:`M z / |M z|` with :math:`M` the rows :math:`K` of the
identity (``(D - N, D)``, :func:`vlbias.models.families.pruned.row_selection`), so a model exports it in its own format
with the removed rows cut out of its projections (:meth:`vlbias.models.base.ModelAdapter.export_linear`). The fitted
state is the kept and the removed dimensions (the latter in the order they were chosen) and :math:`D`.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.mitigation.debiaser import Debiaser, DebiaserOptions, FitData, Modality
from vlbias.mitigation.removal_count import RemovalCount
from vlbias.models.families.pruned import row_selection


@dataclass(frozen=True, kw_only=True)
class RemovalOptions(RemovalCount, DebiaserOptions):
    """N as a count or a share of D (:class:`vlbias.mitigation.removal_count.RemovalCount`: ``n_dims`` or ``fraction``, default a
    fraction of 0.1), and:

    Args:
        seed: seed of the mutual-information estimator's tie-breaking noise.
    """

    seed: int = 0


class DimensionRemoval(Debiaser):
    """A debiaser that removes the dimensions :meth:`_removed` chooses from image and text embeddings (module
    docstring); linear (:meth:`linear_map` gives the kept rows of the identity)."""

    MODIFIES = frozenset({"image", "text"})
    OPTIONS = RemovalOptions

    def _fit(self, data: FitData) -> None:
        dim, removed = self._removed(data)
        kept = torch.ones(dim, dtype=torch.bool)
        kept[removed] = False
        self._keep("removed", removed.long())
        self._keep("kept", kept.nonzero().squeeze(1))
        self._keep("dim", torch.tensor(dim))

    @abc.abstractmethod
    def _removed(self, data: FitData) -> tuple[int, Tensor]:
        """``D`` and the dimensions to remove, in the order the method chose them."""

    def linear_map(self, modality: Modality) -> Tensor:
        state = self.fitted_state()
        return row_selection(state["kept"], int(state["dim"]))


def group_codes(name: str, values: Sequence[Hashable], count: int) -> Tensor:
    """``values`` (one per reference image, ``count`` of them) as integer codes in the order of first appearance."""
    values = list(values)
    if len(values) != count:
        raise InputError(f"Expected one value of `{name}` per reference image but got {len(values)} for {count}")
    codes: dict[Hashable, int] = {}
    return torch.tensor([codes.setdefault(value, len(codes)) for value in values])

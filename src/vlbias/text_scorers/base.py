"""What a text scorer is: named scores of texts (:class:`TextScorer`), built by name from its checked options
(:func:`build_scorer`)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.text_scorers.options import SCORERS


class TextScorer(abc.ABC):
    """Scores of texts: ``score_names`` (one or more per scorer, e.g. ``warmth`` and ``competence``) and
    :meth:`score`. A scorer is built once per run (its model loaded then) and called on each batch of texts."""

    score_names: tuple[str, ...]

    @abc.abstractmethod
    def score(self, texts: Sequence[str]) -> Tensor:
        """``(N, len(score_names))`` float64 scores of the ``N`` non-empty ``texts``."""

    @property
    def config(self) -> dict[str, object]:
        """What determines this scorer's numbers besides its options (recorded in results): its sources."""
        return {}

    def to(self, device: torch.device | str) -> TextScorer:
        """This scorer with its model (if any) on ``device``."""
        return self


def build_scorer(name: str, options: object) -> TextScorer:
    """The scorer registered as ``name`` (:data:`~vlbias.text_scorers.options.SCORERS`) with its checked
    ``options``, its model (if any) loaded on the CPU (:meth:`TextScorer.to` moves it)."""
    return SCORERS.get(name)(options)

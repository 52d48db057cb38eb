"""What a measurement suite is: stimuli + the probe that turns model outputs into metric inputs.

Suites never compute metrics themselves: they call :mod:`vlbias.metrics`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor

from vlbias.errors import ConfigError
from vlbias.models.base import Capability, ImageInput, ModelAdapter
from vlbias.models.inference import measuring


@dataclass
class SuiteOutput:
    """A suite's numbers before they are wrapped in :class:`vlbias.results.Results`."""

    metrics: dict[str, float]
    intervals: dict[str, list[float]] = field(default_factory=dict)
    p_values: dict[str, float] = field(default_factory=dict)
    items: list[dict] = field(default_factory=list)  # one row per item (test, image, caption)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"item": ..., "reason": ...}
    n_items: int = 0


class Suite(abc.ABC):
    """A measurement suite. Subclasses set ``name`` and ``capability`` and implement ``run``.

    ``capability`` is what a model needs for this suite; an instance may override it when an
    option picks the probe (e.g. mmbias with ``probe="match"``). ``capability_hint`` is added to
    the refusal of a model that lacks it (e.g. which option selects another probe).
    """

    name: ClassVar[str]
    capability: Capability
    capability_hint: ClassVar[str] = ""

    @classmethod
    def from_biasworld(cls, world, **options) -> Suite:
        """This suite's stimuli taken from a :class:`~vlbias.data.biasworld.BiasWorld`."""
        raise ConfigError(f"Suite {cls.name!r} cannot read its stimuli from BiasWorld; give a data directory.")

    @classmethod
    def from_path(cls, path: Path, **options) -> Suite:
        """This suite's stimuli read from ``path`` in the suite's public data format."""
        raise ConfigError(f"Suite {cls.name!r} reads its stimuli from BiasWorld only (`--data biasworld`), not from {str(path)!r}.")

    @abc.abstractmethod
    def run(self, adapter: ModelAdapter, seed: int = 0) -> SuiteOutput:
        """Measure ``adapter``; deterministic for a given ``seed``."""

    @property
    @abc.abstractmethod
    def config(self) -> dict[str, object]:
        """The options that determine this suite's numbers (recorded in every result)."""


def embed_images(adapter: ModelAdapter, images: Sequence[ImageInput] | Tensor, batch_size: int) -> Tensor:
    """Normalised embeddings ``(N, D)`` of ``images`` (paths, PIL images or a float tensor in
    [0, 1] of shape (N, 3, H, W)), ``batch_size`` at a time under :func:`measuring`; returned in
    float32 on CPU."""
    with measuring(adapter.device):
        chunks = [
            adapter.embed_images(adapter.prepare_images(images[start : start + batch_size])).float().cpu()
            for start in range(0, len(images), batch_size)
        ]
    return torch.cat(chunks)


def embed_texts(adapter: ModelAdapter, texts: Sequence[str], batch_size: int) -> Tensor:
    """Normalised embeddings ``(N, D)`` of ``texts``, ``batch_size`` at a time under
    :func:`measuring`; returned in float32 on CPU."""
    with measuring(adapter.device):
        chunks = [
            adapter.embed_texts(adapter.prepare_texts(texts[start : start + batch_size])).float().cpu()
            for start in range(0, len(texts), batch_size)
        ]
    return torch.cat(chunks)

"""What a measurement suite is: stimuli, a probe that turns model outputs into metric inputs, and the
``torchmetrics`` objects that give the numbers (:class:`Suite`, :class:`Measurement`).

Suites never compute metrics themselves: they call :mod:`vlbias.metrics`.
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from vlbias.errors import ConfigError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.suites.options import SuiteOptions

if TYPE_CHECKING:
    from torchmetrics import Metric

    from vlbias.data.biasworld import BiasWorld


@dataclass
class SuiteOutput:
    """A suite's numbers before they are wrapped in :class:`vlbias.results.Results`."""

    metrics: dict[str, float]
    intervals: dict[str, list[float]] = field(default_factory=dict)
    p_values: dict[str, float] = field(default_factory=dict)
    items: list[dict] = field(default_factory=list)  # one row per item (test, image, caption)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"item": ..., "reason": ...}
    flags: list[dict[str, str]] = field(default_factory=list)  # {"flag", "metric", "reason"}: vlbias.results
    n_items: int = 0
    stimuli_per_rank: list[int] = field(default_factory=list)  # how many stimuli each rank probed (the runner's)


class Suite(abc.ABC):
    """A measurement suite: stimuli, a probe, and the metrics that turn probe outputs into numbers.

    The contract that lets one suite run anywhere (``vlbias measure``, a training callback, N ranks):

    1. :meth:`stimuli` is a sized, indexable collection of the items a run probes, in a fixed order.
       :func:`vlbias.suites.run.measure_suite` shards it: cut into batches of ``batch_size`` in order, rank
       ``r`` of ``W`` takes batches ``r, r + W, ...``.
    2. :meth:`start` gives a fresh :class:`Measurement` of one adapter: the suite's ``torchmetrics`` objects
       and nothing else stateful.
    3. For each batch of the rank's shard, :meth:`Measurement.probe` turns the items into per-item model
       outputs and :meth:`Measurement.update` feeds them to the metrics (and notes item rows, skips, counts).
    4. The runner syncs every metric of :meth:`Measurement.metrics` across ranks, gathers the rows, skips and
       counts, and calls :meth:`Measurement.compute` on every rank: every rank returns the same
       :class:`SuiteOutput`, equal to a one-process run.

    Subclasses set ``name`` and ``capability`` and implement :meth:`stimuli`, :meth:`start` and
    :attr:`config`; they keep their checked options object (:mod:`vlbias.suites.options`) as ``options``, whose
    ``batch_size`` is how many stimuli one :meth:`Measurement.probe` call gets. ``capability`` is what a model needs
    for this suite; an instance may override it when an option picks the probe (e.g. mmbias with ``probe="match"``).
    ``capability_hint`` is added to the refusal of a model that lacks it (e.g. which option selects another probe).
    """

    name: ClassVar[str]
    capability: Capability
    capability_hint: ClassVar[str] = ""
    options: SuiteOptions

    @property
    def batch_size(self) -> int:
        """How many stimuli one :meth:`Measurement.probe` call gets (the options' ``batch_size``)."""
        return self.options.batch_size

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: SuiteOptions) -> Suite:
        """This suite's stimuli taken from a :class:`~vlbias.data.biasworld.BiasWorld`."""
        raise ConfigError(f"Suite {cls.name!r} cannot read its stimuli from BiasWorld; give a data directory.")

    @classmethod
    def from_path(cls, path: Path, options: SuiteOptions) -> Suite:
        """This suite's stimuli read from ``path`` in the suite's public data format."""
        raise ConfigError(
            f"Suite {cls.name!r} reads its stimuli from BiasWorld only (`--data biasworld`), not from {str(path)!r}."
        )

    @abc.abstractmethod
    def stimuli(self) -> Sequence:
        """The items one run probes, in a fixed order (the unit of sharding); built once, cheap to index."""

    @abc.abstractmethod
    def start(self, adapter: ModelAdapter, seed: int) -> Measurement:
        """A fresh measurement of ``adapter``; ``seed`` seeds the metrics' permutations and bootstraps."""

    @property
    @abc.abstractmethod
    def config(self) -> dict[str, object]:
        """The options that determine this suite's numbers (recorded in every result)."""

    def write_beside(self, results_path: Path, items: list[dict]) -> Path | None:
        """Write what this suite keeps next to its results file ``results_path`` besides the item table ``items``
        (``open_generation``: its generations), atomically; return its path. Most suites keep nothing more."""
        return None


@dataclass
class Batch:
    """Some stimuli of one rank's shard: ``items[i]`` is stimulus number ``indices[i]`` of :meth:`Suite.stimuli`."""

    indices: list[int]
    items: list

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class Gathered:
    """What :meth:`Measurement.update` noted on every rank, joined: ``rows`` and ``skipped`` in stimulus order
    (entries noted at the same stimulus keep the order they were noted in) and ``counts`` summed."""

    rows: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)


class Measurement(abc.ABC):
    """One run of a suite on one adapter, on one rank (see :class:`Suite` for the protocol).

    ``update`` feeds the metrics and notes, for the item table and the skip list, entries tagged with the
    index of the stimulus they belong to (:meth:`note_row`, :meth:`note_skip`), and counts that are summed
    over ranks (:meth:`count`). ``compute`` reads only the synced metrics and the :class:`Gathered` notes, so
    it gives the same answer on every rank; it must not call ``torch.distributed``.

    Metrics are built with ``sync_on_compute=False``: :func:`~vlbias.suites.run.measure_suite` syncs them all
    before ``compute``, in the order of :meth:`metrics`, whatever each rank saw (a rank with no update for a
    metric still takes part). A synced metric's own ``compute`` restores its local state when it returns
    (torchmetrics' sync context), so ``compute`` calls each metric's ``compute`` once and reads no state after it.
    """

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict]] = []
        self.skipped: list[tuple[int, dict]] = []
        self.counts: Counter[str] = Counter()

    def note_row(self, index: int, row: dict) -> None:
        """An item-table row of stimulus ``index``."""
        self.rows.append((index, row))

    def note_skip(self, index: int, entry: dict) -> None:
        """A skip-list entry (``item``, ``reason``, optional ``scope``/``kind``) of stimulus ``index``."""
        self.skipped.append((index, entry))

    def count(self, name: str, value: float = 1) -> None:
        """Add ``value`` to the count ``name`` (summed over ranks)."""
        self.counts[name] += value

    @abc.abstractmethod
    def metrics(self) -> list[Metric]:
        """Every metric ``compute`` reads, in an order fixed by the suite's options (never by the data)."""

    @abc.abstractmethod
    def probe(self, batch: Batch) -> object:
        """Per-item model outputs of ``batch`` (under :func:`~vlbias.models.inference.measuring`); no metric math."""

    @abc.abstractmethod
    def update(self, batch: Batch, outputs: object) -> None:
        """Feed ``outputs`` of ``batch`` to the metrics; note rows, skips and counts."""

    @abc.abstractmethod
    def compute(self, gathered: Gathered) -> SuiteOutput:
        """The suite's numbers from the synced metrics and the gathered notes."""

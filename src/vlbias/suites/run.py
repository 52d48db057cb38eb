"""Running a suite: build it from its checked options (:func:`~vlbias.suites.options.check_suite_options`) and
data, measure one adapter over this rank's shard (:func:`measure_suite`), wrap the numbers in
:class:`~vlbias.results.Results`. ``vlbias measure``, ``vlbias audit`` and :class:`~vlbias.callbacks.BiasSuiteCallback`
all come here.

Under ``torch.distributed`` (a DDP trainer, or any initialised process group) every rank measures its own
shard of :meth:`Suite.stimuli` and all ranks return the same output, equal to a one-process run up to the
float rounding of summing in another order. Metric states and notes travel over a gloo group (the default
group when it is gloo, else one made once for this purpose), so metrics stay on the CPU under NCCL too.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import torch.distributed as dist
from tqdm import tqdm

from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.errors import ConfigError
from vlbias.models.base import Capability, ModelAdapter, require_capability
from vlbias.options import check_options
from vlbias.results import Results
from vlbias.runtime.environment import environment
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.options import SuiteOptions, is_biasworld
from vlbias.suites.registry import suite_class

if TYPE_CHECKING:
    from vlbias.data.biasworld import BiasWorld


def build_suite(options: SuiteOptions, data: str | Path | BiasWorld, biasworld: dict | None = None) -> Suite:
    """The suite of ``options`` (checked by :func:`~vlbias.suites.options.check_suite_options`) over ``data``:
    ``"biasworld"`` (a world built from the ``biasworld`` options, checked here), a
    :class:`~vlbias.data.biasworld.BiasWorld` (or a training run's :class:`~vlbias.data.biasworld_qa.BiasWorldQA`,
    which the chat suites read: :mod:`vlbias.suites.biasworld_qa_source`), or a directory or file in the suite's public format. Options of the
    other data source are refused (:meth:`~vlbias.suites.options.SuiteOptions.check_source`) before any data is read."""
    from_world = is_biasworld(data)
    options.check_source(biasworld=from_world)
    cls = suite_class(options.SUITE)
    if from_world:
        from vlbias.data.biasworld import BiasWorld
        from vlbias.data.biasworld_qa import BiasWorldQA
        from vlbias.suites.biasworld_qa_source import suite_on_world

        if isinstance(data, BiasWorldQA):  # a chat model's training world
            return suite_on_world(cls, data, options)
        if isinstance(data, BiasWorld):
            world = data
        else:
            world = BiasWorld(**check_options(biasworld, BiasWorldOptions, "BiasWorld option"))
        return cls.from_biasworld(world, options)
    path = Path(data)
    if not path.exists():
        raise ConfigError(
            f"Data path {str(path)!r} does not exist; expected a directory or file in the {options.SUITE!r} format or "
            "'biasworld'."
        )
    return cls.from_path(path, options)


PROBED = "stimuli_probed/rank"  # the count of stimuli each rank probed, in ``Gathered.counts``
PROGRESS_VARIABLE = "VLBIAS_PROGRESS"  # "1": show the progress bar even when stderr is not a terminal; "0": never


def shard() -> tuple[int, int]:
    """``(rank, world_size)`` of this process: ``(0, 1)`` without an initialised process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@functools.cache
def _cpu_group(default_group: object) -> object:
    """A gloo process group over every rank: the default group when it is gloo, else a new one (made once per
    default group; every rank reaches this at the same point, as ``new_group`` requires)."""
    if dist.get_backend() == "gloo":
        return None
    return dist.new_group(backend="gloo")


def measure_suite(suite: Suite, adapter: ModelAdapter, seed: int = 0, replicated: bool = False) -> SuiteOutput:
    """Measure ``adapter`` with ``suite`` over this rank's shard, sync the metrics, gather the notes, and
    compute: every rank gets the whole run's :class:`SuiteOutput`.

    The stimuli are cut into batches of ``suite.batch_size`` in order, and rank ``r`` of ``W`` probes batches
    ``r, r + W, ...``: each batch holds the same stimuli as in a one-process run, so a model's outputs (whose
    float32 rounding can depend on what else is in the batch) are the same wherever a batch runs. With
    ``replicated`` every rank probes every batch and computes alone, as one process does: what a model sharded by
    FSDP needs, whose layers gather their parameters from every rank at each forward, so every rank must run the
    same forwards (the ranks' shards of a suite need not hold as many, or as large, batches).

    Rank 0 shows a progress bar of its stimuli on stderr when stderr is a terminal (:func:`_progress`)."""
    rank, world_size = (0, 1) if replicated else shard()
    stimuli = suite.stimuli()
    measurement = suite.start(adapter, seed)
    starts = range(rank * suite.batch_size, len(stimuli), world_size * suite.batch_size)
    shard_size = sum(min(suite.batch_size, len(stimuli) - start) for start in starts)
    probed = 0
    with _progress(suite.name, shard_size, rank) as bar:
        for start in starts:
            indices = list(range(start, min(start + suite.batch_size, len(stimuli))))
            batch = Batch(indices, [stimuli[i] for i in indices])
            measurement.update(batch, measurement.probe(batch))
            probed += len(batch)
            bar.update(len(batch))
    measurement.count(f"{PROBED}{rank}", probed)
    if world_size == 1:
        gathered = _gathered([_notes(measurement)])
        return _finished(measurement.compute(gathered), gathered, world_size)
    group = _cpu_group(dist.group.WORLD)
    metrics = measurement.metrics()
    for metric in metrics:
        if metric.sync_on_compute:
            raise ConfigError(
                f"Suite {suite.name!r} built metric {type(metric).__name__} with sync_on_compute=True; a suite's "
                "metrics are synced by measure_suite and need sync_on_compute=False"
            )
        metric.sync(process_group=group, distributed_available=lambda: True)
    notes: list = [None] * world_size
    dist.all_gather_object(notes, _notes(measurement), group=group)
    gathered = _gathered(notes)
    try:
        with warnings.catch_warnings():  # a rank that fed a metric nothing computes it on the synced state
            warnings.filterwarnings("ignore", message=r".*was called before the ``update`` method")
            return _finished(measurement.compute(gathered), gathered, world_size)
    finally:
        for metric in metrics:  # a metric's own compute already restored its local state (torchmetrics)
            metric.unsync(should_unsync=metric._is_synced)


def _progress(name: str, total: int, rank: int) -> tqdm:
    """A progress bar of ``total`` stimuli on stderr, shown on rank 0 when stderr is a terminal, or whatever
    stderr is when the environment variable ``VLBIAS_PROGRESS`` is ``1`` (never when it is ``0``); it leaves
    no line behind."""
    forced = os.environ.get(PROGRESS_VARIABLE, "")
    shown = rank == 0 and forced != "0" and (forced == "1" or sys.stderr.isatty())
    return tqdm(total=total, desc=f"measure {name}", unit="stimuli", file=sys.stderr, leave=False, disable=not shown)


def _notes(measurement: Measurement) -> tuple[list, list, dict]:
    return measurement.rows, measurement.skipped, dict(measurement.counts)


def _finished(output: SuiteOutput, gathered: Gathered, world_size: int) -> SuiteOutput:
    output.stimuli_per_rank = [int(gathered.counts.get(f"{PROBED}{rank}", 0)) for rank in range(world_size)]
    return output


def _gathered(notes: list[tuple[list, list, dict]]) -> Gathered:
    """Every rank's notes in stimulus order (``sorted`` is stable: one stimulus's notes keep their order)."""
    rows = sorted((entry for rank_rows, _, _ in notes for entry in rank_rows), key=lambda entry: entry[0])
    skipped = sorted((entry for _, rank_skipped, _ in notes for entry in rank_skipped), key=lambda entry: entry[0])
    counts: Counter[str] = Counter()
    for _, _, rank_counts in notes:
        counts.update(rank_counts)
    return Gathered([row for _, row in rows], [entry for _, entry in skipped], dict(counts))


def run_suite(
    suite: Suite,
    adapter: ModelAdapter,
    *,
    model: str,
    checkpoint: str | None,
    seed: int,
    config: dict,
    replicated: bool = False,
) -> tuple[Results, list[dict]]:
    """Run ``suite`` on ``adapter`` (refusing a model without the suite's capability before any compute)
    and wrap its output in :class:`Results`, with the item table. A suite that reads MATCH records what the model's
    pair logit is (:attr:`~vlbias.models.base.ModelAdapter.match_score`: ``itm``, ``sigmoid`` or ``softmax``) as the
    config's ``match_score``."""
    require_capability(adapter, suite.capability, suite.name, suite.capability_hint)
    if suite.capability is Capability.MATCH:
        config = {**config, "match_score": adapter.match_score}
    output = measure_suite(suite, adapter, seed=seed, replicated=replicated)
    results = Results(
        suite=suite.name,
        model=model,
        checkpoint=checkpoint,
        config={
            **config,
            "suite_config": suite.config,
            "stimuli_per_rank": output.stimuli_per_rank,
            "environment": environment(adapter.device),
        },
        seed=seed,
        n_items=output.n_items,
        metrics=output.metrics,
        intervals=output.intervals,
        p_values=output.p_values,
        skipped=output.skipped,
        flags=output.flags,
    )
    return results, output.items

"""Write a ``vlbias debias`` run's folder as a unit (:data:`DEBIAS_FOLDER`, :class:`vlbias.atomic.OutputFolder`).

One method: ``<out>/debias.json`` (the summary: method, options, fitted-state shapes, data, seeds, versions, the
suites' headline numbers and zero-shot accuracy before and after), ``<out>/debiaser/`` (the fitted debiaser,
:func:`write_debiased_model`), ``<out>/before/`` and ``<out>/after/`` (each suite's results schema,
``<suite>.json`` + ``<suite>.items.parquet``, which ``vlbias report`` reads as the runs ``before`` and ``after``).

The compare mode: ``<out>/debias.json`` (the summary of every method), ``<out>/methods/none/`` and
``<out>/methods/<method>/`` (each suite's results, one run each for ``vlbias report``; each method's fitted debiaser in
``<out>/methods/<method>/debiaser/``; with several folds, in ``fold<k>/`` below each),
``<out>/compare.csv`` (:func:`~vlbias.mitigation.comparison.comparison_rows`, or over several folds
:func:`~vlbias.mitigation.comparison.fold_means`, with each fold's rows in ``<out>/compare_folds.csv``) and
``<out>/compare.png`` (:func:`~vlbias.mitigation.comparison.plot_comparison`).

The folder is written whole beside ``<out>`` and put in its place in one step: a reader, or a run killed at any
moment, finds the old folder whole or the new one whole; a folder that is not an earlier output of ``vlbias
debias`` is refused, not replaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from vlbias.atomic import OutputFolder
from vlbias.mitigation.debiaser import Debiaser
from vlbias.models.base import ModelAdapter
from vlbias.results import Results, write_results

SUMMARY_FILE = "debias.json"
DEBIAS_FOLDER = OutputFolder(
    "vlbias debias",
    SUMMARY_FILE,
    frozenset(
        {SUMMARY_FILE, "debiaser", "before", "after", "methods", "compare.csv", "compare_folds.csv", "compare.png"}
    ),
)


def write_debiased_model(folder: Path, adapter: ModelAdapter, debiaser: Debiaser) -> Path:
    """Write what loads the debiased model (``adapter``, the model ``debiaser`` was fitted on, with the fitted
    ``debiaser`` applied) into ``folder``; returns the debiaser's folder.

    It writes the fitted debiaser, ``folder/debiaser`` (:meth:`~vlbias.mitigation.debiaser.Debiaser.save`;
    :func:`~vlbias.mitigation.debiaser.load_debiaser` reads it back), and only that until the ``debiased`` adapter
    (a checkpoint of ``adapter`` with the debiaser) and the families' export of a linear map into their own
    checkpoint format are part of vlbias: writing those is this function's job, so ``vlbias debias`` needs no other
    change when they come."""
    return debiaser.save(folder / "debiaser")


def write_measurements(folder: Path, measured: Mapping[str, tuple[Results, list[dict]]]) -> None:
    """Each suite's results (``{suite: (results, items)}``) in ``folder`` (the results schema)."""
    for results, items in measured.values():
        write_results(folder, results, items)


def write_debias_folder(out: str | Path, summary: Mapping[str, object], write: Callable[[Path], object]) -> Path:
    """Write the run folder ``out`` as a unit: ``write(folder)`` writes its parts, then ``debias.json`` holds
    ``summary``. Returns the path of ``debias.json``."""

    def whole(folder: Path) -> None:
        write(folder)
        (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, allow_nan=False))

    return DEBIAS_FOLDER.replace(out, whole) / SUMMARY_FILE

"""Write a ``vlbias debias`` run's folder as a unit (:data:`DEBIAS_FOLDER`, :class:`vlbias.atomic.OutputFolder`).

One method: ``<out>/debias.json`` (the summary: method, options, fitted-state shapes, data, seeds, versions, the
suites' headline numbers, zero-shot accuracy and, with ``captions``, retrieval R@K before and after),
``<out>/debiaser/``, ``<out>/model/`` and, for a linear method on a family that folds it into its weights,
``<out>/<family>/`` (:func:`write_debiased_model`), ``<out>/before/`` and ``<out>/after/`` (each suite's results schema,
``<suite>.json`` + ``<suite>.items.parquet``, which ``vlbias report`` reads as the runs ``before`` and ``after``).

The compare mode: ``<out>/debias.json`` (the summary of every method), ``<out>/methods/none/`` and
``<out>/methods/<method>/`` (each suite's results, one run each for ``vlbias report``; each method's fitted debiaser in
``<out>/methods/<method>/debiaser/``; with several folds, in ``fold<k>/`` below each),
``<out>/compare.csv`` (:func:`~vlbias.workflows.comparison.comparison_rows`, or over several folds
:func:`~vlbias.workflows.comparison.fold_means`, with each fold's rows in ``<out>/compare_folds.csv``) and
``<out>/compare.png`` (:func:`~vlbias.workflows.comparison.plot_comparison`).

The folder is written whole beside ``<out>`` and put in its place in one step: a reader, or a run killed at any
moment, finds the old folder whole or the new one whole; a folder that is not an earlier output of ``vlbias
debias`` is refused, not replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from vlbias.atomic import OutputFolder
from vlbias.mitigation.debiaser import Debiaser
from vlbias.models.base import ModelAdapter
from vlbias.models.linear_export import EXPORTING_FAMILIES
from vlbias.results import Results, json_dumps, write_results

SUMMARY_FILE = "debias.json"
DEBIAS_FOLDER = OutputFolder(
    "vlbias debias",
    SUMMARY_FILE,
    frozenset(
        {
            SUMMARY_FILE,
            "debiaser",
            "model",
            *EXPORTING_FAMILIES,
            "before",
            "after",
            "methods",
            "compare.csv",
            "compare_folds.csv",
            "compare.png",
        }
    ),
)


def write_debiased_model(folder: Path, adapter: ModelAdapter, debiaser: Debiaser) -> None:
    """Write the model ``debiaser`` (fitted on ``adapter``) makes of ``adapter`` into ``folder``: ``debiaser/`` (the
    fitted debiaser, :func:`~vlbias.mitigation.debiaser.load_debiaser` reads it back), ``model/`` (the
    :class:`~vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings` checkpoint, ``vlbias measure --model debiased
    --checkpoint <out>/model``) and, where the debiaser is linear and the family folds a linear map into its projection
    weights, ``<family>/`` (:data:`~vlbias.models.linear_export.EXPORTING_FAMILIES`; SigLIP's for a change of the text
    embeddings only): the debiased model in the family's own format, which its own loader reads with no vlbias code
    (:meth:`~vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings.export_linear`). The family is the innermost
    model's (:attr:`~vlbias.models.base.ModelAdapter.export_family`): debiasing a ``debiased`` CLIP again writes
    ``clip/``, both debiasers folded into CLIP's projections."""
    from vlbias.mitigation.debiased_embeddings import DebiasedEmbeddings

    debiaser.save(folder / "debiaser")
    model = DebiasedEmbeddings(adapter, debiaser)
    model.save_pretrained(folder / "model")
    if model.no_linear_export is None:
        model.export_linear(None, None, folder / model.export_family)


def write_measurements(folder: Path, measured: Mapping[str, tuple[Results, list[dict]]]) -> None:
    """Each suite's results (``{suite: (results, items)}``) in ``folder`` (the results schema)."""
    for results, items in measured.values():
        write_results(folder, results, items)


def write_debias_folder(out: str | Path, summary: Mapping[str, object], write: Callable[[Path], object]) -> Path:
    """Write the run folder ``out`` as a unit: ``write(folder)`` writes its parts, then ``debias.json`` holds
    ``summary``, its non-finite numbers (an interval a bootstrap could not define) written as ``null`` and listed in
    its ``non_finite`` (:func:`vlbias.results.json_dumps`), so a fitted comparison is never lost to them. Returns the path
    of ``debias.json``."""

    def whole(folder: Path) -> None:
        write(folder)
        (folder / SUMMARY_FILE).write_text(json_dumps(summary))

    return DEBIAS_FOLDER.replace(out, whole) / SUMMARY_FILE

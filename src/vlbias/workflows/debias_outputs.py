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

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

from vlbias.atomic import OutputFolder
from vlbias.mitigation.debiaser import Debiaser
from vlbias.models.base import ModelAdapter
from vlbias.models.linear_export import EXPORTING_FAMILIES
from vlbias.report.pareto import headline_bias
from vlbias.results import Results, json_dumps, write_results
from vlbias.runtime.environment import environment
from vlbias.workflows.comparison import NO_METHOD, fold_means, plot_comparison
from vlbias.workflows.debias_fold import Fold
from vlbias.workflows.options import DebiasOptions

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


def write_parts(folder: Path, options: DebiasOptions, adapter: ModelAdapter, folds: list[Fold], summary: dict) -> None:
    """Write the run's parts into ``folder`` (the module docstring lists them)."""
    if not options.compare:
        (method,) = folds[0].fitted
        write_debiased_model(folder, adapter, folds[0].fitted[method])
        write_measurements(folder / "before", folds[0].measured[NO_METHOD])
        write_measurements(folder / "after", folds[0].measured[method])
        return
    for k, fold in enumerate(folds):
        for method, results in fold.measured.items():
            place = folder / "methods" / method / (f"fold{k}" if len(folds) > 1 else "")
            write_measurements(place, results)
            if method in fold.fitted:
                fold.fitted[method].save(place / "debiaser")
    rows = summary["comparison"]
    (folder / "compare.csv").write_text(table_csv(rows))
    (folder / "compare.png").write_bytes(plot_comparison(rows, headline_bias(rows[0])))
    if len(folds) > 1:
        (folder / "compare_folds.csv").write_text(table_csv(summary["folds"]))


def debias_summary(
    options: DebiasOptions, adapter: ModelAdapter, folds: list[Fold], refusals: Mapping[str, str | None]
) -> dict:
    """``debias.json``'s content: ``comparison`` holds the rows of ``compare.csv`` (one fold's, or the means over
    the folds, :func:`~vlbias.workflows.comparison.fold_means`), ``folds`` each fold's rows."""
    import vlbias

    per_fold = [{"fold": k, **row} for k, fold in enumerate(folds) for row in fold.rows()]
    rows = folds[0].rows() if len(folds) == 1 else fold_means([fold.rows() for fold in folds], options.seed)
    rows += [{"method": method, "not_fitted": reason} for method, reason in refusals.items() if reason is not None]
    return {
        "methods": {method: _method_summary(method, debiaser) for method, debiaser in folds[0].fitted.items()},
        "not_fitted": {method: reason for method, reason in refusals.items() if reason is not None},
        "trained_models": options.trained_models,
        "model": options.model,
        "checkpoint": options.checkpoint,
        "tiny": options.tiny,
        "data": dict(folds[0].fit_data.description or {}),
        "suite_data": options.suite_data,
        "suites": options.suites,
        "suite_options": options.suite_options,
        "captions": options.captions,
        "caption_images": options.caption_images,
        "seed": options.seed,
        "biasworld": dataclasses.asdict(options.biasworld),
        "n_folds": len(folds),
        "fold_worlds": [fold.world["seed"] for fold in folds],
        "vlbias_version": vlbias.__version__,
        "environment": environment(adapter.device),
        "comparison": rows,
        "folds": per_fold,
    }


def _method_summary(method: str, debiaser: Debiaser) -> dict[str, object]:
    """A fitted method's entry in ``debias.json``: its options, needs, what it modifies, its state's shapes and
    whether each modified side is a linear map."""
    return {
        "method": method,
        "options": dataclasses.asdict(debiaser.options),
        "needs": list(debiaser.NEEDS),
        "modifies": sorted(debiaser.MODIFIES),
        "state": {name: list(t.shape) for name, t in debiaser.fitted_state().items()},
        "linear": {m: debiaser.linear_map(m) is not None for m in sorted(debiaser.MODIFIES)},
    }


def table_csv(rows: list[dict]) -> str:
    """``rows`` as CSV text, one column per key (a key missing in a row left empty)."""
    import pandas as pd

    return pd.DataFrame(rows).to_csv(index=False)

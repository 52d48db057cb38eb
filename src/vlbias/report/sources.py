"""Find and read what a report shows: results files, CSV-logger metrics, pruning outputs and trade-off tables.

A *run* is a directory holding ``metrics.csv`` (a CSV-logger run), ``tradeoff.csv`` (written by
:class:`~vlbias.callbacks.TradeoffCallback`, or by ``vlbias prune`` with an ``n_removed`` column),
``prune.json``, ``audit.json`` (written by ``vlbias audit``: the status of each suite and data set) or
``compare.csv`` (written by ``vlbias debias`` in its compare mode: one row per debiasing method); a
results file (``<suite>.json`` with ``<suite>.items.parquet`` beside it) belongs to the nearest such directory
above it, else to its own directory. Per-epoch copies (``epoch=NNN/``) are left out:
the epochs are shown from ``metrics.csv``/``tradeoff.csv``. Nothing is recomputed.

A file that cannot be read is recorded in :attr:`Sources.problems` (path and reason) and the rest is read; so is
each column of a CSV table holding a cell that is not a finite number (:func:`read_numeric_csv`: the cells are
named and left out). A path that does not exist, or inputs holding nothing to report, raise
:class:`~vlbias.errors.InputError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from vlbias.errors import InputError, SchemaError
from vlbias.results import Results, read_items, read_results

RUN_MARKERS = ("metrics.csv", "tradeoff.csv", "prune.json", "audit.json", "compare.csv")
#: The text columns of a ``compare.csv``: the method, and why a method was not fitted.
COMPARE_TEXT = ("method", "not_fitted")
AUDIT_FIELDS = ("suite", "dataset", "status", "reason")
#: The fields of a ``prune.json`` that a report reads as ``{name: number}`` objects.
PRUNE_NUMBERS = ("effect_sizes_before", "effect_sizes_after", "zero_shot_accuracy")


@dataclass
class ResultsFile:
    """One results file: its path, the validated JSON and its per-item table."""

    path: Path
    results: Results
    items: pd.DataFrame


@dataclass
class Run:
    """Everything read from one run directory. ``epochs`` has one row per epoch (``epoch`` column; bias keys
    ``bias/<suite>/<metric>`` with ``/ci_low``, ``/ci_high``); ``pruning`` one row per number of removed
    dimensions (``n_removed`` column); ``prune`` is ``prune.json``; ``audit`` the entries of ``audit.json``;
    ``comparison`` one row per debiasing method (``compare.csv``: ``method`` and ``not_fitted`` text, the rest
    numbers)."""

    name: str
    path: Path
    results: list[ResultsFile] = field(default_factory=list)
    epochs: pd.DataFrame | None = None
    pruning: pd.DataFrame | None = None
    prune: dict | None = None
    audit: list[dict] | None = None
    comparison: pd.DataFrame | None = None


@dataclass
class Sources:
    """The runs read, and what could not be read as ``(file, reason)``."""

    runs: list[Run]
    problems: list[tuple[str, str]]


def read_sources(inputs: list[str | Path]) -> Sources:
    """Read every run under ``inputs`` (run directories, directories of runs, or results JSON files)."""
    runs: dict[Path, Run] = {}
    problems: list[tuple[str, str]] = []
    for given in map(Path, inputs):
        if not given.exists():
            raise InputError(f"Report input {str(given)!r} does not exist.")
        root = given if given.is_dir() else given.parent
        files = _candidates(given)
        for path in files:
            owner = _owner(path, root)
            run = runs.get(owner)
            if run is None:
                name = owner.relative_to(root.parent).as_posix() if owner != root.parent else owner.name
                run = runs[owner] = Run(name=name or str(owner), path=owner)
            try:
                problems += [(str(path), cells) for cells in _read_into(run, path)]
            except (SchemaError, InputError) as err:
                problems.append((str(path), str(err)))
            except (OSError, ValueError, pd.errors.ParserError) as err:
                problems.append((str(path), f"cannot be read: {err}"))
    found = [
        run
        for run in runs.values()
        if run.results
        or run.epochs is not None
        or run.pruning is not None
        or run.prune
        or run.audit is not None
        or run.comparison is not None
    ]
    if not found and not problems:
        raise InputError(
            f"Nothing to report under {', '.join(repr(str(p)) for p in inputs)}: expected <suite>.json results "
            f"(with <suite>.items.parquet), {', '.join(RUN_MARKERS)}."
        )
    return Sources(runs=sorted(found, key=lambda run: run.name), problems=problems)


def _candidates(given: Path) -> list[Path]:
    """The files of ``given`` a report reads, in a stable order."""
    if given.is_file():
        return [given]
    files = []
    for path in sorted(given.rglob("*")):
        if not path.is_file() or any(part.startswith("epoch=") for part in path.relative_to(given).parts):
            continue
        if path.name in RUN_MARKERS or path.suffix == ".json" and _is_results(path):
            files.append(path)
    return files


def _is_results(path: Path) -> bool:
    return path.with_name(path.name.removesuffix(".json") + ".items.parquet").is_file()


def _owner(path: Path, root: Path) -> Path:
    """The nearest directory from ``path``'s up to ``root`` that holds a run marker, else ``path``'s own."""
    for directory in (path.parent, *path.parent.parents):
        if any((directory / marker).is_file() for marker in RUN_MARKERS):
            return directory
        if directory == root:
            break
    return path.parent


def _read_into(run: Run, path: Path) -> list[str]:
    """Read ``path`` into ``run``; return the problems of its cells (a CSV table's columns with cells left out)."""
    if path.name in ("metrics.csv", "tradeoff.csv"):
        table, problems = read_numeric_csv(path)
        if path.name == "metrics.csv":
            run.epochs = _merge_epochs(run.epochs, epoch_table(table, path))
        elif "n_removed" in table.columns:
            run.pruning = table
        else:
            run.epochs = _merge_epochs(epoch_table(table, path), run.epochs)
        return problems
    if path.name == "compare.csv":
        table, problems = read_numeric_csv(path, text=COMPARE_TEXT)
        if "method" not in table.columns:
            raise InputError(f"Comparison {str(path)!r} has no 'method' column; columns are {sorted(table.columns)}.")
        run.comparison = table
        return problems
    if path.name == "prune.json":
        run.prune = prune_summary(path)
    elif path.name == "audit.json":
        run.audit = audit_entries(path)
    else:
        run.results.append(ResultsFile(path, read_results(path), read_items(path)))
    return []


def read_numeric_csv(path: Path, text: Sequence[str] = ()) -> tuple[pd.DataFrame, list[str]]:
    """The CSV table at ``path`` with every column numeric but the ``text`` ones (kept as written, after them), and
    one problem per column that held a cell that is not a finite number (text such as ``n/a``, or ``nan``, ``inf``):
    those cells are named (value and line) and left out, as missing values. An empty cell is a missing value, not a
    problem: a CSV logger leaves the columns a row does not log empty."""
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    kept = raw[[column for column in raw.columns if column in text]]
    raw = raw[[column for column in raw.columns if column not in text]]
    columns, problems = {}, []
    for column in raw.columns:
        text = raw[column].str.strip()
        values = pd.to_numeric(text.where(text != ""), errors="coerce").astype(float)
        bad = (text != "") & ~np.isfinite(values)
        if bad.any():
            cells = ", ".join(f"{text[i]!r} (line {i + 2})" for i in bad[bad].index[:3])
            more = f" and {int(bad.sum()) - 3} more" if bad.sum() > 3 else ""
            problems.append(f"column {column!r}: {int(bad.sum())} cell(s) not a finite number, left out: {cells}{more}")
            values = values.where(~bad)
        columns[column] = values.to_numpy()
    # one float block, not one per column: a wide log (hundreds of bias columns) is otherwise "highly fragmented"
    stacked = np.column_stack(list(columns.values())) if columns else np.empty((len(raw), 0))
    return pd.concat([kept, pd.DataFrame(stacked, index=raw.index, columns=list(columns))], axis=1), problems


def prune_summary(path: Path) -> dict:
    """A ``prune.json``: a JSON object whose :data:`PRUNE_NUMBERS` fields, where present, map names to numbers."""
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"Pruning summary {str(path)!r} is not valid JSON: {err}.") from err
    if not isinstance(summary, dict):
        raise InputError(
            f"Pruning summary {str(path)!r}: expected a JSON object (as `vlbias prune` writes) but got a JSON "
            f"{type(summary).__name__}: {json.dumps(summary)[:100]}."
        )
    for name in PRUNE_NUMBERS:
        value = summary.get(name, {})
        if not isinstance(value, dict) or not all(_is_number(v) for v in value.values()):
            raise InputError(
                f"Pruning summary {str(path)!r}: expected field `{name}` to be an object of numbers but got "
                f"{json.dumps(value)[:200]}."
            )
    return summary


def _is_number(value: object) -> bool:
    return value is None or isinstance(value, int | float) and not isinstance(value, bool)


def audit_entries(path: Path) -> list[dict]:
    """The ``entries`` of an ``audit.json``, each with :data:`AUDIT_FIELDS`."""
    try:
        entries = json.loads(path.read_text()).get("entries")
    except (json.JSONDecodeError, AttributeError) as err:
        raise InputError(f"Audit summary {str(path)!r} is not a valid JSON object: {err}.") from err
    if not isinstance(entries, list) or not all(isinstance(e, dict) and set(AUDIT_FIELDS) <= set(e) for e in entries):
        raise InputError(
            f"Audit summary {str(path)!r}: expected field `entries` to be a list of objects with "
            f"{', '.join(AUDIT_FIELDS)} but got {str(entries)[:200]}."
        )
    return entries


def epoch_table(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """One row per epoch: the last logged value of every column in that epoch (a CSV logger writes
    train and validation values on separate rows)."""
    if "epoch" not in table.columns:
        raise InputError(f"{str(path)!r} has no 'epoch' column; columns are {sorted(table.columns)}.")
    last = table.dropna(subset=["epoch"]).astype({"epoch": int}).groupby("epoch").last()
    return last.copy().reset_index()  # the copy joins the column blocks groupby made, one per column


def _merge_epochs(first: pd.DataFrame | None, second: pd.DataFrame | None) -> pd.DataFrame | None:
    """The columns of both tables by epoch; ``first`` wins where both hold a column."""
    if first is None or second is None:
        return first if second is None else second
    extra = ["epoch", *(c for c in second.columns if c not in first.columns)]
    return first.merge(second[extra], on="epoch", how="outer")

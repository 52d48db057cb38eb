"""``vlbias report``: read runs and results (:mod:`vlbias.report.sources`), write ``<out>/index.html`` and
``<out>/report.md`` with PNG figures beside them, the folder replaced as a unit (:data:`REPORT_FOLDER`): a kill
leaves the old report or the new one, whole. Recomputes nothing: every number is one a results file, a CSV log
or a pruning summary holds.

The report opens with the problems met in its inputs (a file that cannot be read, cells that are not finite
numbers, a column asked for that no input has), then an audit's table, bias over epochs, bias against accuracy,
pruning, debiasing methods compared (:mod:`vlbias.report.comparison_section`), one section per results file (:mod:`vlbias.report.results_section`), and a glossary of every metric
name it shows (:mod:`vlbias.report.glossary`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

import vlbias
from vlbias.atomic import OutputFolder
from vlbias.report import plots
from vlbias.report.comparison_section import comparison_section
from vlbias.report.glossary import entries, undefined
from vlbias.report.render import Block, Figures, Heading, Table, Text, markdown, page
from vlbias.report.results_section import results_section
from vlbias.report.sources import Run, read_sources
from vlbias.report.tables import number
from vlbias.results import logged_bias_keys

#: A report's folder, replaced as a unit (:class:`~vlbias.atomic.OutputFolder`): its pages and numbered figures.
REPORT_FOLDER = OutputFolder("vlbias report", "index.html", frozenset({"index.html", "report.md", "[0-9][0-9]_*.png"}))


@dataclass
class Report:
    """What :func:`build_report` wrote, and the problems with its inputs as ``(file or option, reason)``: files it
    could not read, cells it left out, columns asked for that no input has."""

    html: Path
    markdown: Path
    images: list[Path]
    problems: list[tuple[str, str]]


def build_report(
    inputs: Sequence[str | Path],
    out: str | Path,
    accuracy: str | list[str] | None = None,
    bias: str | list[str] | None = None,
) -> Report:
    """Write the report of ``inputs`` (run directories, directories of runs, or results files) into ``out``.

    Args:
        inputs: where to look; see :mod:`vlbias.report.sources`.
        out: output directory (created).
        accuracy: the accuracy column(s) to plot bias against (e.g. ``val/activity_accuracy``, or a list
            ``[val/activity_accuracy, zero_shot_accuracy]``); default every column whose name holds ``accuracy``,
            except ``train/...``.
        bias: the bias column(s) of those plots; default every ``bias/...`` metric of the epoch tables and every
            ``.../effect_size`` of pruning trade-off tables.
    """
    accuracy = [accuracy] if isinstance(accuracy, str) else accuracy
    bias = [bias] if isinstance(bias, str) else bias
    sources = read_sources(list(inputs))
    out = REPORT_FOLDER.check(out)
    figures = Figures()
    problems = sources.problems + _missing_columns(sources.runs, accuracy, bias)
    sections = [
        *_audit_section(sources.runs),
        *_epoch_section(sources.runs, figures),
        *_tradeoff_section(sources.runs, figures, accuracy, bias),
        *_pruning_section(sources.runs),
        *comparison_section(sources.runs, figures),
        *_results_section(sources.runs, figures),
        *_glossary_section(sources.runs),
    ]
    blocks: list[Block] = [
        Heading("vlbias report", 1),
        Text(
            f"Runs: {', '.join(run.name for run in sources.runs) or 'none'}. "
            f"Written {datetime.now(UTC).isoformat(timespec='seconds')} by vlbias {vlbias.__version__}."
        ),
    ]
    if problems:
        blocks += [Heading("Problems with the inputs"), Table(["input", "problem"], [list(p) for p in problems])]
    blocks += sections

    def write(folder: Path) -> None:
        for name, png in figures.files.items():
            (folder / name).write_bytes(png)
        (folder / "report.md").write_text(markdown(blocks), encoding="utf-8")
        (folder / "index.html").write_text(page("vlbias report", blocks), encoding="utf-8")

    REPORT_FOLDER.replace(out, write)
    images = [out / name for name in figures.files]
    return Report(html=out / "index.html", markdown=out / "report.md", images=images, problems=problems)


def _missing_columns(
    runs: list[Run], accuracy: Sequence[str] | None, bias: Sequence[str] | None
) -> list[tuple[str, str]]:
    """A problem for each column of ``accuracy`` and ``bias`` (the options) that no epoch or pruning table has."""
    tables = [table for _, _, table in _point_tables(runs)]
    columns = list(dict.fromkeys(c for table in tables for c in table.columns))
    problems = []
    for option, asked, like in (("accuracy", accuracy, lambda c: "accuracy" in c), ("bias", bias, _is_bias_column)):
        for column in dict.fromkeys(asked or []):
            if column in columns:
                continue
            near = [c for c in columns if like(c)][:8]
            if not tables:
                have = ": the inputs hold no epoch or pruning table (metrics.csv, tradeoff.csv)"
            elif near:
                have = f"; the {option} columns of its {len(tables)} epoch or pruning table(s): {', '.join(near)}"
            else:
                have = f"; its {len(tables)} epoch or pruning table(s) have no {option} column"
            problems.append((f"--{option} {column}", f"no input has column {column!r}{have}"))
    return problems


def _is_bias_column(column: str) -> bool:
    return column in logged_bias_keys([column]) or column.endswith("/effect_size")


def _audit_section(runs: list[Run]) -> list[Block]:
    """One table per ``vlbias audit``: every suite and data set, measured (with its results file) or why not."""
    blocks: list[Block] = []
    for run in runs:
        if run.audit is None:
            continue
        rows = [
            [e["suite"], e["dataset"], e["status"], e.get("results") or e["reason"], _options(e.get("options"))]
            for e in run.audit
        ]
        blocks += [
            Heading(f"Audit: {run.name}", 3),
            Table(["suite", "data", "status", "results or reason", "probe"], rows),
        ]
    return [Heading("Audit"), *blocks] if blocks else []


def _options(options: dict | None) -> str:
    return ", ".join(f"{key}={value}" for key, value in (options or {}).items())


def _epoch_section(runs: list[Run], figures: Figures) -> list[Block]:
    tables = {run.name: run.epochs for run in runs if run.epochs is not None}
    keys = list(dict.fromkeys(key for table in tables.values() for key in logged_bias_keys(table.columns)))
    if not keys:
        return []
    blocks: list[Block] = [Heading("Bias over epochs"), Text("Shaded: the interval logged with each value.")]
    for key in keys:
        having = {name: table for name, table in tables.items() if key in table and table[key].notna().any()}
        blocks.append(figures.add(f"epochs_{key}", plots.metric_over_epochs(key, having), key))
    return blocks


def _point_tables(runs: list[Run]) -> list[tuple[str, str, pd.DataFrame]]:
    """(run, name of the position column, table) of every per-epoch and per-N table."""
    tables = [(run.name, "epoch", run.epochs) for run in runs if run.epochs is not None]
    return tables + [(run.name, "n_removed", run.pruning) for run in runs if run.pruning is not None]


def _points(tables: list[tuple[str, str, pd.DataFrame]], bias: str, accuracy: str) -> pd.DataFrame | None:
    """Every row holding both ``bias`` and ``accuracy``, as ``run``, ``at`` (e.g. ``epoch 3``), ``bias``,
    ``accuracy``; ``None`` when there is none."""
    points = []
    for name, at, table in tables:
        if {bias, accuracy} <= set(table.columns):
            rows = table.dropna(subset=[at, bias, accuracy])
            labels = [f"{at} {int(value)}" for value in rows[at]]
            points.append(pd.DataFrame({"run": name, "at": labels, "bias": rows[bias], "accuracy": rows[accuracy]}))
    points = [frame for frame in points if len(frame)]
    return pd.concat(points, ignore_index=True) if points else None


def _bias_columns(at: str, table: pd.DataFrame) -> list[str]:
    """The default bias columns: logged bias metrics per epoch, effect sizes per number of pruned dimensions."""
    if at == "epoch":
        return logged_bias_keys(table.columns)
    return [c for c in table.columns if c.endswith("/effect_size")]


def _tradeoff_section(
    runs: list[Run], figures: Figures, accuracy: Sequence[str] | None, bias: Sequence[str] | None
) -> list[Block]:
    tables = _point_tables(runs)
    columns = list(dict.fromkeys(c for _, _, table in tables for c in table.columns))
    accuracy = list(accuracy or [c for c in columns if "accuracy" in c and not c.startswith("train/")])
    if bias is None:
        bias = [key for _, at, table in tables for key in _bias_columns(at, table)]
    blocks: list[Block] = []
    for bias_key in dict.fromkeys(bias):
        for accuracy_key in accuracy:
            points = _points(tables, bias_key, accuracy_key)
            if points is None:
                continue
            frame = plots.with_front(points)
            png = plots.bias_vs_accuracy(frame, bias_key, accuracy_key)
            blocks.append(figures.add(f"tradeoff_{bias_key}_{accuracy_key}", png, f"{bias_key} vs {accuracy_key}"))
            front = frame[frame["front"]].sort_values("abs_bias")
            rows = [[r.run, r.at, number(r.bias), number(r.accuracy)] for r in front.itertuples()]
            blocks.append(Table(["Pareto-optimal run", "at", bias_key, accuracy_key], rows))
    if blocks:
        blocks.insert(0, Heading("Bias against accuracy"))
        blocks.insert(1, Text("Each point is an epoch of a run (or a number of pruned dimensions); ringed and "
                              "joined: the Pareto front (lower |bias|, higher accuracy)."))  # fmt: skip
    return blocks


def _pruning_section(runs: list[Run]) -> list[Block]:
    blocks: list[Block] = []
    for run in runs:
        summary = run.prune
        if not summary:
            continue
        before, after = summary.get("effect_sizes_before", {}), summary.get("effect_sizes_after", {})
        accuracy = summary.get("zero_shot_accuracy", {})
        blocks += [
            Heading(f"Pruning: {run.name}", 3),
            Text(
                f"Model {summary.get('model')}, strategy {summary.get('strategy')}, removed "
                f"{summary.get('n_remove')} of {summary.get('embedding_dim')} dimensions; zero-shot accuracy "
                f"{number(accuracy.get('before'))} -> {number(accuracy.get('after'))}."
            ),
            Table(["test", "effect size before", "after"], [[t, number(v), number(after.get(t))] for t, v in before.items()]),
        ]  # fmt: skip
    return [Heading("Pruning"), *blocks] if blocks else []


def _results_section(runs: list[Run], figures: Figures) -> list[Block]:
    blocks: list[Block] = []
    for run in runs:
        for entry in run.results:
            blocks += results_section(run.name, entry, entry.path.relative_to(run.path).as_posix(), figures)
    return [Heading("Results"), *blocks] if blocks else []


def shown_names(runs: list[Run]) -> dict[str, list[str]]:
    """``{suite: [metric name, ...]}`` of every name the report shows: the results' metrics (counts included), the
    logged ``bias/<suite>/<metric>`` columns of the epoch tables, and the pruning tests' effect sizes (the
    ``mmbias`` suite's tests)."""
    shown: dict[str, dict[str, None]] = {}
    for run in runs:
        for entry in run.results:
            shown.setdefault(entry.results.suite, {}).update(dict.fromkeys(entry.results.metrics))
        if run.epochs is not None:
            for key in logged_bias_keys(run.epochs.columns):
                _, suite, metric = key.split("/", 2)
                shown.setdefault(suite, {})[metric] = None
        pruned = [c for c in run.pruning.columns if c.endswith("/effect_size")] if run.pruning is not None else []
        pruned += [f"{test}/effect_size" for test in (run.prune or {}).get("effect_sizes_before", {})]
        shown.setdefault("mmbias", {}).update(dict.fromkeys(pruned))
    return {suite: list(names) for suite, names in shown.items() if names}


def _glossary_section(runs: list[Run]) -> list[Block]:
    """Per suite, the glossary entry of every term the names shown use, and the names without one."""
    blocks: list[Block] = []
    for suite, names in sorted(shown_names(runs).items()):
        used, missing = entries(suite, names), undefined(suite, names)
        blocks.append(Heading(suite, 3))
        if used:
            blocks.append(Table(["name", "meaning"], [[", ".join(terms), text] for terms, text in used.items()]))
        if missing:
            blocks.append(Text(f"No glossary entry (not a suite name, or a name its docstring does not define): {', '.join(missing)}."))  # fmt: skip
    if not blocks:
        return []
    intro = Text(
        "What each name above means, from the suites' docstrings (the API reference shows the same text). A name "
        "is made of these terms and of the names of tests, groups and targets, e.g. group/<group>/max_skew@10."
    )
    return [Heading("Glossary"), intro, *blocks]

"""The section of one results file: its headline (:mod:`vlbias.report.headline`), where it came from, figures that
carry information, every measure with its interval and p-values, the counts, and the skipped items by reason.

Figures: a forest plot of every effect size with its interval (association suites), per-group bars where the
suite reports groups (:data:`GROUP_BARS`), and a heatmap of effect sizes per target pair × attribute pair only
when that table has at least two rows and two columns."""

from __future__ import annotations

import re

import pandas as pd

from vlbias.report import plots
from vlbias.report.headline import headline
from vlbias.report.render import Block, Figures, Heading, Table, Text
from vlbias.report.sources import ResultsFile
from vlbias.report.tables import (
    COUNT_HEADERS,
    METRIC_HEADERS,
    association_tables,
    count_rows,
    measures,
    metric_rows,
    number,
    skipped_rows,
)
from vlbias.results import Results

#: suite -> patterns (full matches) of the metrics drawn as grouped bars: ``group`` is a bar's place on the x axis,
#: ``series`` its colour, ``panel`` (optional) one figure each, ``scale`` (optional) one y axis each within the
#: figure: series that are different metrics with different ranges (retrieval's ``min_skew`` near -5, ``bias`` in
#: [-1, 1]) get axes of their own. Drawn where at least two groups have a value.
GROUP_BARS: dict[str, tuple[str, ...]] = {
    "retrieval_bias": (r"group/(?P<group>[^/]+)/(?P<series>(?P<scale>[a-z_]+))(?P<panel>@\d+)",),
    "gallery_skew": (r"group/(?P<group>[^/]+)/(?P<series>[a-z_]+)/max_skew(?P<panel>@\d+)",),  # per concept
    "vlstereoset": (r"(?P<series>vlrs|vlbs|ivlas)/(?P<group>[^/]+)",),
    "mmbias": (r"zero_shot/(?P<group>[^/]+)/(?P<series>pleasant_share)",),
    "counterbias": (r"(?P<panel>[^/]+)/(?P<group>[^/]+)/(?P<series>B@(?:V-L|V|L))",),
    "entity_association": (r"(?P<series>B_[A-Za-z_]+)/(?P<group>[^/]+)",),
    "zero_shot_fairness": (r"(?P<panel>[^/]+)/group/(?P<group>[^/]+)/(?P<series>accuracy|non_human_rate|crime_rate)",),
    "bias_qa": (
        r"(?P<panel>category)/(?P<group>[^/]+)/(?P<series>bias_(?:ambiguous|disambiguated))",
        r"(?P<panel>position)/(?P<group>\d+)/(?P<series>share|expected_share)",
    ),
    "counterfactual_answers": (r"gap/(?P<panel>[^/]+)/(?P<series>[^/]+)/(?P<group>[^/]+)",),  # per attribute
    "open_generation": (r"(?P<series>(?P<scale>[^/]+))/(?P<panel>[^/]+)/mean/(?P<group>[^/]+)",),  # per grouping
}
EFFECT_SIZE = "/effect_size"


def results_section(run: str, entry: ResultsFile, where: str, figures: Figures) -> list[Block]:
    """The blocks of one results file of run ``run``, at ``where`` (its path within the run)."""
    results = entry.results
    blocks: list[Block] = [Heading(f"{run}: {results.suite} ({where})", 3), *headline(results, entry.items)]
    blocks.append(
        Text(
            f"Model {results.model}, checkpoint {results.checkpoint}, seed {results.seed}; vlbias "
            f"{results.vlbias_version}, commit {results.git_commit}, created {results.created}."
        )
    )
    title = f"{run}: {results.suite}"
    if forest := _forest(results, title):
        blocks.append(figures.add(f"forest_{title}", forest, f"{title} effect sizes"))
    for panel, png in _group_bars(results, title).items():
        blocks.append(figures.add(f"bars_{panel}", png, panel))
    for kind, table in association_tables(entry.items).items():
        if min(table.shape) >= 2:
            alt = f"{title} {kind} effect sizes".replace("  ", " ")
            blocks.append(figures.add(f"heatmap_{title}_{kind}", plots.effect_size_heatmap(table, alt), alt))
    rows = metric_rows(results)
    if rows:
        blocks += [Heading("Every measure", 4), Table(METRIC_HEADERS, rows)]
    counts, zero = count_rows(results)
    blocks += [Heading("Counts", 4), Table(COUNT_HEADERS, counts)]
    if zero:
        blocks.append(Text(f"Zero: {', '.join(zero)}."))
    if results.skipped:
        blocks += [Heading("Skipped", 4), Table(["skipped because", "scope", "items", "examples"], skipped_rows(results))]  # fmt: skip
    return blocks


def _forest(results: Results, title: str) -> bytes | None:
    """The forest plot of every ``.../effect_size`` of ``results``, each labelled with its Holm-adjusted p-value."""
    rows = []
    for name in (m for m in measures(results) if m.endswith(EFFECT_SIZE)):
        low, high = results.intervals.get(name, (None, None))
        holm = results.p_values.get(f"{name}@holm")
        rows.append((name.removesuffix(EFFECT_SIZE), results.metrics[name], low, high, "" if holm is None else f"p (Holm) {number(holm)}"))  # fmt: skip
    if not rows:
        return None
    return plots.forest(rows, "effect size, with its interval", f"{title} effect sizes")


def _group_bars(results: Results, title: str) -> dict[str, bytes]:
    """``{figure title: PNG}``: per panel, the metrics matching the suite's :data:`GROUP_BARS` as grouped bars with
    their intervals, where at least two groups have a value."""
    found: dict[str, list[dict]] = {}
    for pattern in GROUP_BARS.get(results.suite, ()):
        for name in measures(results):
            match = re.fullmatch(pattern, name)
            if match is None:
                continue
            parts = match.groupdict()
            low, high = results.intervals.get(name, (float("nan"), float("nan")))
            point = {"group": parts["group"], "series": parts["series"], "value": results.metrics[name]}
            point["scale"] = parts.get("scale") or ""
            found.setdefault(parts.get("panel") or "", []).append(point | {"low": low, "high": high})
    drawn = {}
    for panel, points in found.items():
        frame = pd.DataFrame(points)
        if frame["group"].nunique() < 2:
            continue
        order = {"index": list(dict.fromkeys(frame["group"])), "columns": list(dict.fromkeys(frame["series"]))}
        tables = [frame.pivot(index="group", columns="series", values=v).reindex(**order) for v in ("value", "low", "high")]  # fmt: skip
        name = f"{title} per group" + (f" ({panel})" if panel else "")
        scales = [list(dict.fromkeys(rows["series"])) for _, rows in frame.groupby("scale", sort=False)]
        drawn[name] = plots.grouped_bars(*tables, "value (error bar: its interval)", name, scales)
    return drawn

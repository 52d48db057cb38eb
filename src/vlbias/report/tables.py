"""The report's tables, built from results as they are: metrics with intervals and p-values, counts, skipped items
by reason, effect sizes per target pair × attribute pair. A count (:func:`~vlbias.results.is_count`) is never in
a metrics table: counts have a table of their own, without intervals."""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from vlbias.results import Results, flags_of, is_count

METRIC_HEADERS = ["metric", "value", "CI low", "CI high", "p", "p (Holm)", "p (BH)"]
COUNT_HEADERS = ["count", "value"]
ASSOCIATION_COLUMNS = {"x", "y", "a", "b", "effect_size"}
P_SUFFIXES = ("", "@holm", "@bh")  # raw, Holm, Benjamini–Hochberg: the suites store them under these keys


def number(value: float | None) -> str:
    """A number as the report prints it (4 significant digits); missing or non-finite as ``n/a``."""
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    return f"{value:.4g}"


def present(value: float | None) -> str:
    """:func:`number` of a value that may be absent (an interval or p-value a metric does not have): ``""``."""
    return "" if value is None else number(value)


def value(results: Results, metric: str) -> str:
    """``metric``'s :func:`number`, marked ``(flagged: <flag>)`` where a flag of the results covers it (a number that
    cannot mean what it says, e.g. a degenerate classifier's gap of 0)."""
    marks = ", ".join(dict.fromkeys(flag["flag"] for flag in flags_of(results, metric)))
    return number(results.metrics[metric]) + (f" (flagged: {marks})" if marks else "")


def measures(results: Results) -> list[str]:
    """The metric names of ``results`` that measure something (not counts), in the results' order."""
    return [metric for metric in results.metrics if not is_count(metric)]


def metric_row(results: Results, metric: str) -> list[str]:
    """``metric``: value, interval and raw / Holm / Benjamini–Hochberg p-values; ``""`` where it has none."""
    low, high = results.intervals.get(metric, (None, None))
    p_values = [results.p_values.get(metric + suffix) for suffix in P_SUFFIXES]
    return [metric, value(results, metric), present(low), present(high), *map(present, p_values)]


def metric_rows(results: Results) -> list[list[str]]:
    """One :func:`metric_row` per measure (not the counts)."""
    return [metric_row(results, metric) for metric in measures(results)]


def count_rows(results: Results) -> tuple[list[list[str]], list[str]]:
    """The counts: rows ``[name, value]`` for the items measured, the skipped entries and every count metric that
    is not 0, and the names of the count metrics that are 0."""
    rows = [["items measured", str(results.n_items)], ["skipped (entries)", str(len(results.skipped))]]
    zero = []
    for metric, value in results.metrics.items():
        if not is_count(metric):
            continue
        if value == 0:
            zero.append(metric)
        else:
            rows.append([metric, f"{value:.0f}" if float(value).is_integer() else number(value)])
    return rows, zero


def skipped_rows(results: Results) -> list[list[str]]:
    """The skipped items by reason (and scope, where given): count and up to three example items."""
    groups: dict[tuple[str, str], list[str]] = {}
    for entry in results.skipped:
        groups.setdefault((str(entry["reason"]), str(entry.get("scope", ""))), []).append(str(entry["item"]))
    counts = Counter({key: len(items) for key, items in groups.items()})
    return [
        [reason, scope, str(count), ", ".join(groups[(reason, scope)][:3])]
        for (reason, scope), count in counts.most_common()
    ]


def association_sets(items: pd.DataFrame) -> dict[str, tuple[str, str, str, str]]:
    """``{test: (X, Y, A, B)}``, the sets of each association test of an item table (empty for other suites)."""
    if not ASSOCIATION_COLUMNS | {"test"} <= set(items.columns):
        return {}
    tests = items.dropna(subset=["effect_size"])
    return {str(row.test): (str(row.x), str(row.y), str(row.a), str(row.b)) for row in tests.itertuples()}


def association_tables(items: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Effect sizes of an association suite's item table (one row per test, columns ``x``, ``y``, ``a``,
    ``b``, ``effect_size``; rows without an effect size, like zero-shot rankings, are left out) pivoted to
    target pair × attribute pair, one table per ``kind`` of test. A cell two tests share is labelled
    by the tests' names instead, so no value is hidden."""
    if not ASSOCIATION_COLUMNS <= set(items.columns):
        return {}
    tests = items.dropna(subset=["effect_size"])
    kinds = tests["kind"] if "kind" in tests.columns else pd.Series("", index=tests.index)
    tables = {}
    for kind, rows in tests.groupby(kinds, sort=True):
        rows = rows.assign(target=rows["x"].astype(str) + " vs " + rows["y"].astype(str))
        rows = rows.assign(attribute=rows["a"].astype(str) + " vs " + rows["b"].astype(str))
        if rows.duplicated(["target", "attribute"]).any() and "test" in rows.columns:
            rows = rows.assign(target=rows["test"].astype(str))
        tables[str(kind)] = rows.pivot_table(
            index="target", columns="attribute", values="effect_size", aggfunc="first", sort=False
        )
    return tables

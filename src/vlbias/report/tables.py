"""The report's tables, built from results as they are: metrics with intervals and p-values, skipped items
by reason, effect sizes per target pair × attribute pair."""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from vlbias.results import Results

METRIC_HEADERS = ["metric", "value", "CI low", "CI high", "p", "p (Holm)", "p (BH)"]
ASSOCIATION_COLUMNS = {"x", "y", "a", "b", "effect_size"}


def number(value: float | None) -> str:
    """A number as the report prints it (4 significant digits); missing or non-finite as ``n/a``."""
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    return f"{value:.4g}"


def metric_rows(results: Results) -> list[list[str]]:
    """One row per metric: value, interval, raw / Holm / Benjamini–Hochberg p-values (the suites store the
    adjusted ones under ``<metric>@holm`` and ``<metric>@bh``)."""
    rows = []
    for metric, value in results.metrics.items():
        low, high = results.intervals.get(metric, (None, None))
        p = [results.p_values.get(metric + suffix) for suffix in ("", "@holm", "@bh")]
        rows.append([metric, *map(number, (value, low, high, *p))])
    return rows


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

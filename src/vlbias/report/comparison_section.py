"""The report's section of a ``vlbias debias`` comparison (``compare.csv``): per comparison, a figure of the headline
bias (:func:`~vlbias.report.pareto.headline_bias`) against zero-shot accuracy with the Pareto front, and a table of
every method, fitted or not, with each number's interval (retrieval R@K too, where the comparison measured it).
Recomputes nothing."""

from __future__ import annotations

import pandas as pd

from vlbias.report import plots
from vlbias.report.pareto import headline_bias
from vlbias.report.render import Block, Figures, Heading, Table, Text
from vlbias.report.sources import Run
from vlbias.report.tables import number

ACCURACY = "zero_shot_accuracy"  # vlbias.mitigation.tradeoff.ACCURACY (that module imports torch)
RECALL = "retrieval_recall/"  # vlbias.workflows.comparison.RECALL's columns (that module imports torch)


def with_interval(row: pd.Series, column: str) -> str:
    """``value [low, high]`` of ``column`` in ``row`` (``n/a`` where missing; the value alone without interval)."""
    value = number(row.get(column))
    low, high = row.get(f"{column}/ci_low"), row.get(f"{column}/ci_high")
    return value if pd.isna(low) or pd.isna(high) else f"{value} [{number(low)}, {number(high)}]"


def comparison_section(runs: list[Run], figures: Figures) -> list[Block]:
    blocks: list[Block] = []
    for run in runs:
        table = run.comparison
        if table is None or table.empty:
            continue
        bias = headline_bias(table.columns)
        fitted = table[table[ACCURACY].notna()] if ACCURACY in table else table.iloc[0:0]
        blocks.append(Heading(f"Debiasing methods: {run.name}", 3))
        if len(fitted):
            points = pd.DataFrame({"run": fitted["method"], "bias": fitted[bias], "accuracy": fitted[ACCURACY]})
            png = plots.bias_vs_accuracy(plots.with_front(points.reset_index(drop=True)), bias, ACCURACY)
            blocks.append(figures.add(f"debias_{run.name}_{bias}", png, f"{bias} vs {ACCURACY}"))
        notes = table["not_fitted"] if "not_fitted" in table else pd.Series("", index=table.index)
        recall = [c for c in table.columns if c.startswith(RECALL) and not c.endswith(("/ci_low", "/ci_high"))]
        rows = [
            [row["method"], with_interval(row, bias), with_interval(row, ACCURACY)]
            + [with_interval(row, column) for column in recall]
            + [notes[i] or ""]
            for i, row in table.iterrows()
        ]
        headers = [f"{column} [interval]" for column in (bias, ACCURACY, *recall)]
        blocks.append(Table(["method", *headers, "not fitted because"], rows))
    if blocks:
        blocks.insert(0, Heading("Debiasing methods compared"))
        blocks.insert(1, Text("Every method fitted on the same data and measured on the same suites and seed; "
                              "ringed and joined: the Pareto front (lower |bias|, higher accuracy)."))  # fmt: skip
    return blocks

"""The result rows of association tests, built once for every suite: one row per test from a test metric's
``compute`` (:class:`~vlbias.metrics.WEATTest`, :class:`~vlbias.metrics.ITMTest`,
:class:`~vlbias.metrics.GroundedCongruenceTest`), the Holm and Benjamini–Hochberg adjustment over a family of
rows, and the entries those rows give the results schema (metric, interval, raw and adjusted p-values)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.metrics.functional.multiple_testing import benjamini_hochberg, holm_bonferroni
from vlbias.suites.base import SuiteOutput

ADJUSTMENTS = (("", "p_value"), ("@holm", "p_holm"), ("@bh", "p_bh"))  # key suffix, row column


def association_row(result: dict[str, Tensor]) -> dict[str, object]:
    """``effect_size``, ``statistic``, ``p_value``, ``ci_low``, ``ci_high``, ``n_x``, ``n_y`` of one test's
    ``compute`` output (a permutation test with :math:`|X| \\ne |Y|` re-partitions into sets of the original
    sizes; a paired test such as congruence has its own).

    Example:
        >>> row = association_row({"effect_size": torch.tensor(1.5), "statistic": torch.tensor(0.2),
        ...     "p_value": torch.tensor(0.25), "interval": torch.tensor([0.5, 2.0]),
        ...     "n_x": torch.tensor(3), "n_y": torch.tensor(4)})
        >>> row["ci_low"], row["n_y"], row["p_value"]
        (0.5, 4, 0.25)
    """
    low, high = (float(v) for v in result["interval"])
    return {
        "effect_size": float(result["effect_size"]),
        "statistic": float(result["statistic"]),
        "p_value": float(result["p_value"]),
        "ci_low": low,
        "ci_high": high,
        "n_x": int(result["n_x"]),
        "n_y": int(result["n_y"]),
    }


def adjust_p_values(rows: Sequence[dict]) -> None:
    """Add Holm (``p_holm``) and Benjamini–Hochberg (``p_bh``) adjusted p-values to ``rows``, the family being
    every row with a finite ``p_value``; the others get NaN."""
    tested = [row for row in rows if math.isfinite(row["p_value"])]
    for row in rows:
        row["p_holm"] = row["p_bh"] = math.nan
    if tested:
        raw = torch.tensor([row["p_value"] for row in tested], dtype=torch.float64)
        for row, holm, bh in zip(tested, holm_bonferroni(raw).tolist(), benjamini_hochberg(raw).tolist(), strict=True):
            row["p_holm"], row["p_bh"] = holm, bh


def report_tests(output: SuiteOutput, rows: Sequence[dict], name: str = "test") -> None:
    """Adjust ``rows``' p-values over the family and enter each row in ``output``: the metric
    ``<row[name]>/effect_size``, its interval, and its raw p-value under the same key with the adjusted ones
    under ``<key>@holm`` and ``<key>@bh`` (rows without a p-value enter none)."""
    adjust_p_values(rows)
    for row in rows:
        key = f"{row[name]}/effect_size"
        output.metrics[key] = row["effect_size"]
        output.intervals[key] = [row["ci_low"], row["ci_high"]]
        if math.isfinite(row["p_value"]):
            for suffix, column in ADJUSTMENTS:
                output.p_values[f"{key}{suffix}"] = row[column]


def enter_measured(output: SuiteOutput, results: dict[str, Tensor], name: str) -> None:
    """Enter ``name`` of a metric's ``compute`` output ``results`` in ``output``: its value, its interval
    (``<name>/interval``) and, where ``results`` holds them, its raw and adjusted p-values (``<name>/p_value``,
    ``/p_holm``, ``/p_bh``) under ``name``, ``name@holm`` and ``name@bh``."""
    output.metrics[name] = float(results[name])
    output.intervals[name] = [float(end) for end in results[f"{name}/interval"]]
    for suffix, column in ADJUSTMENTS:
        if f"{name}/{column}" in results:
            output.p_values[f"{name}{suffix}"] = float(results[f"{name}/{column}"])

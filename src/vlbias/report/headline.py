"""The headline of a results file, before its full table: what the suite measures, its key numbers with their
intervals and adjusted p-values (each flag of the results first, and a flagged number marked), the sets each association test compares, which sign is bias toward whom, and,
for a tiny random-weight model, how to read a "significant" number. What the suite measures and its sign
convention are its module docstring's (:mod:`vlbias.report.glossary`); the key numbers are the metrics matching
:data:`KEY_METRICS`, shown as the results hold them."""

from __future__ import annotations

import re

import pandas as pd

from vlbias.report.glossary import suite_text
from vlbias.report.render import Block, Table, Text
from vlbias.report.tables import P_SUFFIXES, association_sets, measures, number, present, value
from vlbias.results import Results

#: suite -> patterns (full matches) of its key metrics, in the order the headline lists them. A suite not listed
#: here has every measure as a key number.
KEY_METRICS: dict[str, tuple[str, ...]] = {
    "mmbias": (r".+/effect_size", r".+/probability_gap", r"zero_shot/[^/]+/pleasant_share"),
    "weat": (r".+/effect_size",),
    "vlstereoset": ("vlbs", "vlrs", "ivlas", "lmss/mean", "vlss/mean"),
    "retrieval_bias": (r"all/[a-z_]+@\d+",),
    "gallery_skew": (r"[a-z_]+/(?:max_skew|kl)@\d+", r"folds/[a-z_]+/max_skew@\d+", r"precision@\d+"),
    "counterbias": (r"[^/]+/B@.+/avg", r"[^/]+/[^/]+/B@V-L", "attack_success_rate"),
    "entity_association": (r"B_L/[^/]+", r"B_V/[^/]+", r"B_PT/[^/]+", r"B_L_no_image/[^/]+"),
    "bias_qa": (r"(?:accuracy|bias)_(?:ambiguous|disambiguated)", "position/max_deviation", "position/change_rate"),
    "counterfactual_answers": ("max_change", "js_divergence", "flip_rate", "unknown_rate", r"gap/[^/]+/[^/]+/[^/]+"),
    "open_generation": (r"[^/]+/[^/]+/gap", r"[^/]+/mean"),
    "zero_shot_fairness": (
        "accuracy",
        r"[^/]+/worst_group_gap",
        r"[^/]+/equal_opportunity_gap_max",
        r"[^/]+/group/[^/]+/(?:non_human|crime)_rate",
    ),
}
#: At most this many key numbers in a headline; the rest are in the full table.
MAX_KEY_ROWS = 12

TINY_CAVEAT = (
    "A tiny random-weight model (config.tiny), which has learned nothing: these numbers check that the "
    'measurement runs. A "significant" result here is no bias it learned: random weights map different inputs '
    "differently, so a test can find an association whose size and sign are accidents of the initialisation "
    "(another seed gives others)."
)


def key_metrics(results: Results) -> list[str]:
    """The key metrics of ``results``: the measures matching :data:`KEY_METRICS` of its suite, pattern by pattern."""
    names = measures(results)
    patterns = KEY_METRICS.get(results.suite)
    if patterns is None:
        return names
    chosen: dict[str, None] = {}
    for pattern in patterns:
        chosen |= {name: None for name in names if re.fullmatch(pattern, name)}
    return list(chosen)


def _confidence(results: Results) -> str:
    """``" (95%)"`` from the recorded statistics' ``confidence``, or ``""`` where none is recorded."""
    statistics = results.config.get("suite_config", {}).get("statistics", {})
    confidence = statistics.get("confidence") if isinstance(statistics, dict) else None
    return f" ({confidence:.0%})" if isinstance(confidence, float) else ""


def key_table(results: Results, names: list[str]) -> Table:
    """``names`` with value, interval and raw / Holm / Benjamini–Hochberg p-values (the p columns none of them has
    are left out)."""
    headers = ["key number", "value", f"interval{_confidence(results)}", "p", "p (Holm)", "p (BH)"]
    rows = []
    for name in names:
        interval = results.intervals.get(name)
        shown = "" if interval is None else f"[{number(interval[0])}, {number(interval[1])}]"
        rows.append([name, value(results, name), shown, *(present(results.p_values.get(name + s)) for s in P_SUFFIXES)])  # fmt: skip
    kept = [i for i in range(len(headers)) if i < 3 or any(row[i] for row in rows)]
    return Table([headers[i] for i in kept], [[row[i] for i in kept] for row in rows])


def headline(results: Results, items: pd.DataFrame) -> list[Block]:
    """The headline blocks of one results file (module docstring)."""
    text = suite_text(results.suite)
    blocks: list[Block] = []
    for flag in results.flags:  # before any number: these numbers cannot mean what they say
        covered = f"metric {flag['metric']}" if flag["metric"] else "every number below"
        blocks.append(Text(f"{flag['reason']} ({covered}).", f"Flagged {flag['flag']}:"))
    if text.measures:
        blocks.append(Text(text.measures, "What it measures:"))
    keys = key_metrics(results)
    if keys:
        blocks.append(key_table(results, keys[:MAX_KEY_ROWS]))
    if len(keys) > MAX_KEY_ROWS:
        blocks.append(Text(f"{len(keys) - MAX_KEY_ROWS} more key numbers are in the full table below."))
    sets = association_sets(items)
    compared = [(test, sets[test]) for test in dict.fromkeys(k.rsplit("/", 1)[0] for k in keys[:MAX_KEY_ROWS]) if test in sets]  # fmt: skip
    if compared:
        described = "; ".join(f"{test}: X = {x}, Y = {y}, A = {a}, B = {b}" for test, (x, y, a, b) in compared)
        blocks.append(Text(f"{described}.", "Sets compared:"))
    if text.direction:
        blocks.append(Text(text.direction, "Direction:"))
    if results.config.get("tiny"):
        blocks.append(Text(TINY_CAVEAT, "Caveat:"))
    return blocks

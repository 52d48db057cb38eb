"""JSON that may hold non-finite numbers: each written as ``null`` and listed, read back as it was.

JSON has no NaN or infinity: ``json.dumps(..., allow_nan=False)`` refuses them, and Python's default writes the
tokens ``NaN`` and ``Infinity``, which other readers reject. :func:`dumps` writes every non-finite float (a Python
float, a tensor or numpy scalar) as ``null`` and lists where each one was in the top-level field
:data:`NON_FINITE`: ``[{"at": [key or index, ...], "value": "nan" | "inf" | "-inf"}, ...]`` (``[]`` when every
number is finite), so a summary is always written and a reader sees which numbers are undefined; :func:`loads`
puts the numbers back (``null`` at a listed place becomes the float again).

Example:
    >>> text = dumps({"rows": [{"d": 0.5, "d/ci_low": float("nan")}]})
    >>> json.loads(text)["non_finite"]
    [{'at': ['rows', 0, 'd/ci_low'], 'value': 'nan'}]
    >>> loads(text)["rows"][0]["d/ci_low"]
    nan
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

#: The top-level field listing the places of the non-finite numbers.
NON_FINITE = "non_finite"
Place = list[str | int]


def json_ready(value: object, at: tuple[str | int, ...] = (), found: list[dict] | None = None) -> object:
    """``value`` with every non-finite float replaced by ``None`` (its place ``at`` and value appended to ``found``
    when given), tensors and numpy scalars as Python numbers, paths as strings, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v, (*at, str(k)), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v, (*at, i), found) for i, v in enumerate(value)]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        if found is not None:
            found.append({"at": list(at), "value": str(value)})
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def dumps(record: Mapping[str, object]) -> str:
    """``record`` (a JSON object) as standard JSON, indented, its non-finite numbers written as the module says."""
    found: list[dict] = []
    ready = json_ready({key: value for key, value in record.items() if key != NON_FINITE}, (), found)
    return json.dumps({**ready, NON_FINITE: found}, indent=2, allow_nan=False)


def loads(text: str) -> dict:
    """A JSON object written by :func:`dumps`, its non-finite numbers put back in their places."""
    record = json.loads(text)
    for entry in record.get(NON_FINITE, []):
        *path, last = entry["at"]
        holder = record
        for key in path:
            holder = holder[key]
        holder[last] = float(entry["value"])
    return record

"""The one results schema: ``<out>/<suite>.json`` plus ``<out>/<suite>.items.parquet``, replaced as a unit.

A result is two files, so it is written in an order that makes the JSON the commit point:

1. the item table goes (atomically) to a staged name, ``.<suite>.items.<sha256>.parquet``;
2. the JSON, which names its item table by file name and SHA-256 (field ``items``), replaces the old JSON
   atomically: from here on the new result is the result;
3. the staged table is renamed over ``<suite>.items.parquet``.

A write killed before step 2 leaves the old result as it was (and a staged file); one killed between steps 2
and 3 leaves the new JSON with the old table beside it and the new one staged: :func:`read_items` and
:func:`read_results` take the table whose SHA-256 the JSON names, so a reader sees the old result whole or
the new one whole, never a mix, and refuses (naming both files) a table that belongs to another JSON. The
next :func:`write_results` into the directory finishes a killed write's step 3 and deletes the temporary
files (:mod:`vlbias.atomic`) and staged tables that a killed process left.

Numbers. Every metric, interval end and p-value is checked before anything is written: ``NaN`` (or
``None``) means "undefined" (no item reached a group, zero variance) and is written as ``null``
(:func:`json_ready`; read back as ``None``, which readers show as nan); an
infinite value, or one larger in magnitude than :data:`LARGEST` (1e12: no statistic vlbias reports, from
effect sizes and scores in [0, 100] to log-probability differences and counts, comes near it; a bigger one is
an overflow), or a p-value outside [0, 1], is refused with a :class:`~vlbias.errors.SchemaError` naming the
metric and the value, and the old result is left as it was. The float columns of the item table are held to
the same rule (NaN there is pandas' "missing").

JSON fields:
    schema_version (int), suite, model, checkpoint (str | None), vlbias_version,
    git_commit (str | None), config (dict: the resolved configuration), seed (int),
    n_items (int: items measured), metrics ({name: float | None}), intervals ({name: [lo, hi]}),
    p_values ({name: float}), skipped ([{item, reason}]: items not measured and why),
    flags ([{flag, metric, reason}]: numbers that cannot mean what they say, e.g. ``degenerate_classifier``;
    ``metric`` is a metric name, a prefix ending in ``/`` or ``""`` for every metric, see :func:`flags_of`;
    optional when read, files written before it have none), created (ISO 8601 UTC), items ({file, sha256}: the
    item table this JSON belongs to).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

import vlbias
from vlbias.atomic import TEMPORARY_SUFFIX, atomic_write, is_stale, remove_stale_temporaries
from vlbias.errors import ConfigError, SchemaError

SCHEMA_VERSION = 2  # 2: the JSON names its item table (``items``)
ITEMS_SUFFIX = ".items.parquet"
LARGEST = 1e12  # a measured number larger in magnitude is an overflow
_STAGED = re.compile(r"^\.(?P<name>.+)\.items\.(?P<sha256>[0-9a-f]{64})\.parquet$")
#: Suffixes of a logged bias metric's interval and p-value (``bias/<suite>/<metric>/ci_low``, as
#: :class:`~vlbias.callbacks.BiasSuiteCallback` logs them).
INTERVAL_SUFFIXES = ("/ci_low", "/ci_high", "/p_value")


def is_count(metric: str) -> bool:
    """Whether ``metric`` counts items rather than measures bias: a segment of its name starts with ``n_``
    (``n_skipped/<kind>``, ``n_truncated``, ``n_images``, ``<test>/n_queries``). Results files keep counts with the
    metrics; reports, trade-off plots and model cards leave them out of the bias they show.

    Example:
        >>> is_count("n_skipped/unknown"), is_count("bias/mmbias/man_vs_woman/cross_modal/effect_size")
        (True, False)
    """
    return any(segment.startswith("n_") for segment in metric.split("/"))


def logged_bias_keys(columns: Iterable[str]) -> list[str]:
    """The bias metrics among logged ``columns``: ``bias/...`` keys that are neither an interval or p-value
    (:data:`INTERVAL_SUFFIXES`) nor a count (:func:`is_count`)."""
    return [c for c in columns if c.startswith("bias/") and not c.endswith(INTERVAL_SUFFIXES) and not is_count(c)]


@dataclass
class Results:
    """What a suite run produced, with everything needed to reproduce it."""

    suite: str
    model: str
    checkpoint: str | None
    config: dict
    seed: int
    n_items: int
    metrics: dict[str, float]
    intervals: dict[str, list[float]] = field(default_factory=dict)
    p_values: dict[str, float] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    flags: list[dict[str, str]] = field(default_factory=list)
    vlbias_version: str = vlbias.__version__
    git_commit: str | None = None
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.created:
            self.created = datetime.now(UTC).isoformat(timespec="seconds")
        if self.git_commit is None:
            self.git_commit = _git_commit()

    def nothing_measured(self, data: str | Path) -> str | None:
        """Why this run on ``data`` measured nothing (no item measured, or no metric), with the most common skip
        reasons; ``None`` when it measured something. The one rule: ``vlbias measure`` refuses such a run, the bias
        callback says so."""
        if self.n_items and self.metrics:
            return None
        reasons = Counter(entry.get("reason", "?") for entry in self.skipped).most_common(3)
        listed = "; ".join(f"{count}x {reason}" for reason, count in reasons) or "no item was skipped either"
        return (
            f"Suite {self.suite!r} measured nothing on data {str(data)!r} ({self.n_items} items measured, "
            f"{len(self.metrics)} metrics, {len(self.skipped)} skipped: {listed})"
        )


def flags_of(results: Results, metric: str) -> list[dict[str, str]]:
    """The flags of ``results`` that cover ``metric``: those naming it, a prefix of it ending in ``/``, or ``""``
    (every metric)."""
    return [
        flag
        for flag in results.flags
        if flag["metric"] in ("", metric) or flag["metric"].endswith("/") and metric.startswith(flag["metric"])
    ]


def _git_commit() -> str | None:
    """The commit of the source tree vlbias is imported from, if it is a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def ensure_writable(directory: str | Path) -> Path:
    """Create ``directory`` if needed and check that files can be written in it."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".vlbias-write-test.", suffix=TEMPORARY_SUFFIX):
            pass
    except OSError as err:
        raise ConfigError(f"Output directory {str(directory)!r} is not writable: {err.strerror or err}.") from err
    return directory


def _plain(value: object) -> object:
    """A tensor's or numpy scalar's Python value; anything else as it is."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


def _shown(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else f"{value!r:.60}"


def _number_problem(value: object, p_value: bool = False) -> str | None:
    """Why ``value`` cannot be written as a measured number (``None``: it can; NaN and ``None`` are "undefined")."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"a {type(value).__name__}, not a number"
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "not finite"
    if abs(value) > LARGEST:
        return f"beyond ±{LARGEST:g}: an overflow, not a measurement (is an option such as a temperature extreme?)"
    if p_value and not 0 <= value <= 1:
        return "outside [0, 1]"
    return None


def _check_numbers(results: Results, table: pd.DataFrame, target: Path) -> None:
    """Refuse (:class:`SchemaError`, naming the entry and its value) a measured number that is not one: see the
    module's "Numbers"."""
    refused = f"Results {str(target)!r} not written (any result there is left as it was)"
    entries = [("metric", key, value, False) for key, value in results.metrics.items()]
    entries += [("p-value", key, value, True) for key, value in results.p_values.items()]
    for key, interval in results.intervals.items():
        if not (isinstance(interval, (list, tuple)) or hasattr(interval, "tolist")) or len(interval) != 2:
            raise SchemaError(f"{refused}: interval {key!r} should be [lo, hi] but is {interval!r:.60}.")
        entries += [("interval", key, end, False) for end in interval]
    for kind, key, value, p_value in entries:
        value = _plain(value)
        problem = _number_problem(value, p_value)
        if problem:
            raise SchemaError(f"{refused}: {kind} {key!r} is {_shown(value)}, {problem}.")
    for column in table.columns:
        if pd.api.types.is_float_dtype(table[column]):
            values = table[column].to_numpy(dtype=float, na_value=np.nan)
            bad = np.flatnonzero(np.isinf(values) | (np.abs(np.nan_to_num(values)) > LARGEST))
            if bad.size:
                row, value = int(bad[0]), float(values[bad[0]])
                raise SchemaError(
                    f"{refused}: item table column {str(column)!r}, row {row}, is {_shown(value)}, "
                    f"{_number_problem(value)} ({bad.size} such row(s))."
                )


def write_results(
    out_dir: str | Path, results: Results, items: pd.DataFrame | list[dict] | None = None, name: str | None = None
) -> Path:
    """Replace the result ``<out_dir>/<name>.json`` + ``<out_dir>/<name>.items.parquet`` as a unit (``name``:
    the suite's, unless two runs of one suite share a folder), in the order the module describes, after
    checking its numbers and tidying what killed writes left in ``out_dir``; returns the JSON path."""
    out_dir, name = ensure_writable(out_dir), name or results.suite
    json_path, items_path = out_dir / f"{name}.json", out_dir / f"{name}{ITEMS_SUFFIX}"
    table = items if isinstance(items, pd.DataFrame) else pd.DataFrame(items or [])
    _check_numbers(results, table, json_path)
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    table_bytes = buffer.getvalue()
    digest = hashlib.sha256(table_bytes).hexdigest()
    record = json_ready(asdict(results)) | {"items": {"file": items_path.name, "sha256": digest}}
    payload = json.dumps(record, indent=2, allow_nan=False).encode()
    _finish_killed_writes(out_dir)
    staged = _staged_path(items_path, digest)
    atomic_write(staged, lambda handle: handle.write(table_bytes))
    atomic_write(json_path, lambda handle: handle.write(payload))  # the commit point
    os.replace(staged, items_path)
    return json_path


def _finish_killed_writes(directory: str | Path) -> None:
    """Tidy ``directory`` after writes that were killed (only files older than this process: a writer running
    now keeps its own): a staged item table whose JSON already names it is renamed into place (step 3 of the
    module's order), any other staged table is deleted (its write never committed), and so are the
    temporary files of :mod:`vlbias.atomic`."""
    directory = Path(directory)
    for staged in directory.glob(".*.items.*.parquet"):
        match = _STAGED.match(staged.name)
        try:
            if match is None or not is_stale(staged):
                continue
            if _named_sha256(directory / f"{match['name']}.json") == match["sha256"]:
                os.replace(staged, directory / f"{match['name']}{ITEMS_SUFFIX}")
            else:
                staged.unlink()
        except FileNotFoundError:  # another process tidied it first
            continue
    remove_stale_temporaries(directory)


def _staged_path(items_path: Path, digest: str) -> Path:
    return items_path.with_name(f".{items_path.name.removesuffix(ITEMS_SUFFIX)}.items.{digest}.parquet")


def _named_sha256(json_path: Path) -> str | None:
    """The item table SHA-256 a results JSON names, or ``None`` if it is missing or unreadable."""
    try:
        return json.loads(json_path.read_text())["items"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


_TYPES: dict[str, tuple[type, ...]] = {
    "schema_version": (int,),
    "suite": (str,),
    "model": (str,),
    "checkpoint": (str, type(None)),
    "config": (dict,),
    "seed": (int,),
    "n_items": (int,),
    "metrics": (dict,),
    "intervals": (dict,),
    "p_values": (dict,),
    "skipped": (list,),
    "flags": (list,),
    "vlbias_version": (str,),
    "git_commit": (str, type(None)),
    "created": (str,),
    "items": (dict,),
}


def read_results(path: str | Path) -> Results:
    """Read and validate a results JSON and check that its item table is there and is the one it names; a bad
    file, or a table from another run, raises :class:`SchemaError` saying what is wrong."""
    path = Path(path)
    payload = _read_payload(path)
    _items_bytes(path, payload["items"])
    return Results(**{key: value for key, value in payload.items() if key != "items"})


def read_items(path: str | Path) -> pd.DataFrame:
    """The per-item table of results file ``path`` (``<suite>.json``): the one whose SHA-256 the JSON names
    (see the module's order of writing). Given a ``.parquet`` path instead, that file as it is."""
    path = Path(path)
    if path.suffix != ".json":
        if not path.is_file():
            raise SchemaError(f"Per-item table {str(path)!r} does not exist.")
        return pd.read_parquet(path)
    return pd.read_parquet(io.BytesIO(_items_bytes(path, _read_payload(path)["items"])))


def _read_payload(path: Path) -> dict:
    """The JSON of results file ``path``, every field checked."""
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise SchemaError(f"Results file {str(path)!r} does not exist.") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SchemaError(f"Results file {str(path)!r} is not valid JSON: {err}.") from err
    if not isinstance(payload, dict):
        raise SchemaError(f"Results file {str(path)!r}: expected a JSON object but got {type(payload).__name__}.")
    payload.setdefault("flags", [])  # files written before flags existed
    expected = {f.name for f in fields(Results)} | {"items"}
    missing, unknown = sorted(expected - payload.keys()), sorted(payload.keys() - expected)
    if missing or unknown:
        raise SchemaError(f"Results file {str(path)!r}: missing field(s) {missing}, unknown field(s) {unknown}.")
    for name, types in _TYPES.items():
        if not isinstance(payload[name], types) or isinstance(payload[name], bool) and int in types:
            raise SchemaError(
                f"Results file {str(path)!r}: field {name!r} should be {' or '.join(t.__name__ for t in types)} "
                f"but is {type(payload[name]).__name__} ({payload[name]!r:.60})."
            )
    if payload["schema_version"] != SCHEMA_VERSION:
        raise SchemaError(
            f"Results file {str(path)!r}: schema_version {payload['schema_version']} is not {SCHEMA_VERSION}."
        )
    for name, value in payload["intervals"].items():
        if not (isinstance(value, list) and len(value) == 2):
            raise SchemaError(f"Results file {str(path)!r}: interval {name!r} should be [lo, hi] but is {value!r}.")
    for entry in payload["skipped"]:
        if not (isinstance(entry, dict) and {"item", "reason"} <= entry.keys()):
            raise SchemaError(
                f"Results file {str(path)!r}: each skipped entry needs 'item' and 'reason', got {entry!r}."
            )
    for entry in payload["flags"]:
        if not (isinstance(entry, dict) and {"flag", "metric", "reason"} <= entry.keys()):
            raise SchemaError(
                f"Results file {str(path)!r}: each flags entry needs 'flag', 'metric' and 'reason', got {entry!r}."
            )
    items = payload["items"]
    file, digest = items.get("file"), items.get("sha256")
    if not (isinstance(file, str) and file == Path(file).name and file and isinstance(digest, str)):
        raise SchemaError(
            f"Results file {str(path)!r}: field 'items' should be {{file: a file name beside it, sha256: ...}} "
            f"but is {items!r:.80}."
        )
    return payload


def _items_bytes(json_path: Path, items: dict) -> bytes:
    """The bytes of the item table ``items`` names: ``<file>`` beside ``json_path``, or the staged copy a write
    killed before its last rename left; refused if neither exists or neither has the SHA-256 named."""
    table = json_path.with_name(items["file"])
    found = {}
    for candidate in (table, _staged_path(table, items["sha256"])):
        try:
            found[candidate] = candidate.read_bytes()
        except FileNotFoundError:
            continue
        if hashlib.sha256(found[candidate]).hexdigest() == items["sha256"]:
            return found[candidate]
    if not found:
        raise SchemaError(f"Per-item table {str(table)!r} of results file {str(json_path)!r} does not exist.")
    actual = hashlib.sha256(found[table]).hexdigest() if table in found else "absent"
    raise SchemaError(
        f"Per-item table {str(table)!r} does not belong to results file {str(json_path)!r}: its SHA-256 is "
        f"{actual[:12]}… but the results name {items['sha256'][:12]}… (the two come from different runs)."
    )


# -- JSON with non-finite numbers (debias.json, prune.json) ---------------------------------------------------
#: The top-level field listing the places of the non-finite numbers.
NON_FINITE = "non_finite"


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


def json_dumps(record: Mapping[str, object]) -> str:
    """``record`` (a JSON object) as standard JSON, indented. JSON has no NaN or infinity (``json.dumps(...,
    allow_nan=False)`` refuses them; Python's default writes ``NaN`` and ``Infinity``, which other readers reject):
    every non-finite float (a Python float, a tensor or numpy scalar) is written as ``null`` and its place listed in
    the top-level field :data:`NON_FINITE`, ``[{"at": [key or index, ...], "value": "nan" | "inf" | "-inf"}, ...]``
    (``[]`` when every number is finite), so a summary is always written and a reader sees which numbers are
    undefined; :func:`json_loads` puts the numbers back.

    Example:
        >>> text = json_dumps({"rows": [{"d": 0.5, "d/ci_low": float("nan")}]})
        >>> json.loads(text)["non_finite"]
        [{'at': ['rows', 0, 'd/ci_low'], 'value': 'nan'}]
        >>> json_loads(text)["rows"][0]["d/ci_low"]
        nan
    """
    found: list[dict] = []
    ready = json_ready({key: value for key, value in record.items() if key != NON_FINITE}, (), found)
    return json.dumps({**ready, NON_FINITE: found}, indent=2, allow_nan=False)


def json_loads(text: str) -> dict:
    """A JSON object written by :func:`json_dumps`, its non-finite numbers put back in their places."""
    record = json.loads(text)
    for entry in record.get(NON_FINITE, []):
        *path, last = entry["at"]
        holder = record
        for key in path:
            holder = holder[key]
        holder[last] = float(entry["value"])
    return record

"""The one results schema: ``<out>/<suite>.json`` plus ``<out>/<suite>.items.parquet``.

Both files are written atomically (a temporary file in the same directory, flushed, fsynced and
renamed over the target), the per-item table first and the JSON last, so a crash never leaves a
half-written file and a JSON on disk always has its item table beside it.

JSON fields:
    schema_version (int), suite, model, checkpoint (str | None), vlbias_version,
    git_commit (str | None), config (dict: the resolved configuration), seed (int),
    n_items (int: items measured), metrics ({name: float}), intervals ({name: [lo, hi]}),
    p_values ({name: float}), skipped ([{item, reason}]: items not measured and why),
    created (ISO 8601 UTC).
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

import vlbias
from vlbias.atomic import atomic_write
from vlbias.errors import ConfigError, SchemaError

SCHEMA_VERSION = 1


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
    vlbias_version: str = vlbias.__version__
    git_commit: str | None = None
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.created:
            self.created = datetime.now(UTC).isoformat(timespec="seconds")
        if self.git_commit is None:
            self.git_commit = _git_commit()


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
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".vlbias-write-test-"):
            pass
    except OSError as err:
        raise ConfigError(f"Output directory {str(directory)!r} is not writable: {err.strerror or err}.") from err
    return directory


def _json_ready(value):
    """Floats that JSON cannot hold (nan, inf) become ``None``; tensors/numpy scalars become floats."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_results(
    out_dir: str | Path, results: Results, items: pd.DataFrame | list[dict] | None = None, name: str | None = None
) -> Path:
    """Write ``<out_dir>/<name>.items.parquet`` then ``<out_dir>/<name>.json`` (``name``: the suite's, unless
    two runs of one suite share a folder); returns the JSON path."""
    out_dir, name = ensure_writable(out_dir), name or results.suite
    table = items if isinstance(items, pd.DataFrame) else pd.DataFrame(items or [])
    atomic_write(out_dir / f"{name}.items.parquet", lambda handle: table.to_parquet(handle, index=False))
    payload = json.dumps(_json_ready(asdict(results)), indent=2, allow_nan=False).encode()
    json_path = out_dir / f"{name}.json"
    atomic_write(json_path, lambda handle: handle.write(payload))
    return json_path


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
    "vlbias_version": (str,),
    "git_commit": (str, type(None)),
    "created": (str,),
}


def read_results(path: str | Path) -> Results:
    """Read and validate a results JSON; a bad file raises :class:`SchemaError` saying what is wrong."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise SchemaError(f"Results file {str(path)!r} does not exist.") from err
    except json.JSONDecodeError as err:
        raise SchemaError(f"Results file {str(path)!r} is not valid JSON: {err}.") from err
    if not isinstance(payload, dict):
        raise SchemaError(f"Results file {str(path)!r}: expected a JSON object but got {type(payload).__name__}.")
    expected = {f.name for f in fields(Results)}
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
    return Results(**payload)


def read_items(path: str | Path) -> pd.DataFrame:
    """The per-item table written beside ``<suite>.json``."""
    path = Path(path)
    items = path.with_name(path.name.removesuffix(".json") + ".items.parquet") if path.suffix == ".json" else path
    if not items.is_file():
        raise SchemaError(f"Per-item table {str(items)!r} does not exist.")
    return pd.read_parquet(items)

"""The one way the data readers read text files (SEAT/Grounded JSONL, MMBias JSON, VL-Bias CSV and index JSON,
VLStereoSet CSV, entity-association YAML, debiasing prompt files), so that every reader:

* accepts a UTF-8 byte-order mark (a spreadsheet's "CSV UTF-8" starts with one): files are read as ``utf-8-sig``;
* refuses bytes that are not UTF-8 with an :class:`~vlbias.errors.InputError` naming the file, the line, the
  column, the byte and its offset in the file and, where the file still parses, the field that holds it (a JSON/YAML key path such as
  ``targ1.captions['3']``, or a CSV column name);
* refuses a CSV field longer than :data:`MAX_CSV_FIELD` characters naming the file, line and column (Python's
  ``csv`` would raise ``field larger than field limit`` without saying which);
* refuses a file that cannot be read (missing, a folder, no permission) naming it.

To find the field of a byte that is not UTF-8, the file is decoded once more with each such byte replaced by
U+FFFD, parsed by the reader's own format (``locate``), and the first string holding U+FFFD is named.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "spec.jsonl"
    >>> _ = path.write_bytes(b'{"targ1":\\n  {"captions": {"3": "caf\\xe9"}}}')
    >>> read_text(path, "SEAT spec", locate=json_field)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vlbias.errors.InputError: SEAT spec '...spec.jsonl': line 2, column 26, field targ1.captions['3']: byte 0xe9 is not UTF-8 (byte offset 35); save the file as UTF-8
"""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from vlbias.errors import InputError

ENCODING = "utf-8-sig"  # UTF-8, with or without a byte-order mark
MAX_CSV_FIELD = 131_072  # characters: the default of Python's csv.field_size_limit
_MARK = "\ufffd"  # what an undecodable byte becomes while looking for its field
_FIELD_LIMIT_LOCK = threading.Lock()


@dataclass(frozen=True)
class CsvRecord:
    """One CSV record: ``line`` is the file line it starts on (1-based), ``cells`` its fields."""

    line: int
    cells: list[str]


def read_text(path: str | Path, what: str, locate: Callable[[str], str | None] | None = None) -> str:
    """The text of the file ``path`` (``what`` names its kind in errors, e.g. ``"SEAT spec"``).

    ``locate(text)`` parses a version of the text whose undecodable bytes are U+FFFD and returns the field
    holding the first of them (:func:`json_field`, :func:`yaml_field`), so that the error names it.
    """
    path = Path(path)
    where = f"{what} {str(path)!r}"
    if not path.is_file():
        raise InputError(f"{where} does not exist" if not path.exists() else f"{where} is not a regular file")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"{where} could not be read: {err.strerror or err}") from err
    try:
        return data.decode(ENCODING)
    except UnicodeDecodeError as err:
        before = data[: err.start].decode(ENCODING, errors="replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        field = locate(data.decode(ENCODING, errors="replace")) if locate is not None else None
        raise InputError(
            f"{where}: line {line}, column {column}{f', field {field}' if field else ''}: "
            f"byte 0x{data[err.start]:02x} is not UTF-8 (byte offset {err.start}); save the file as UTF-8"
        ) from None


def read_json(path: str | Path, what: str) -> object:
    """The JSON value in the file ``path``; errors name the file, line and column (and field, see :func:`read_text`)."""
    text = read_text(path, what, locate=json_field)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{what} {str(path)!r} is not a JSON file: its text is not valid JSON at line {err.lineno}, "
            f"column {err.colno} ({err.msg})"
        ) from None


def read_csv(path: str | Path, what: str) -> list[CsvRecord]:
    """Every record of the CSV file ``path`` (the header first, blank lines left out), with its line.

    A field longer than :data:`MAX_CSV_FIELD` characters is refused naming its line and column (the
    header's name for it, else its number), as are undecodable bytes (:func:`read_text`) and malformed CSV.
    """
    text = read_text(path, what, locate=_csv_field)
    records, header = [], None
    reader = csv.reader(io.StringIO(text, newline=""))
    with _csv_fields_unlimited():
        try:
            last_line = 0
            for cells in reader:
                line, last_line = last_line + 1, reader.line_num
                if not any(cell.strip() for cell in cells):
                    continue
                header = header or cells
                long = next((k for k, cell in enumerate(cells) if len(cell) > MAX_CSV_FIELD), None)
                if long is not None:
                    raise InputError(
                        f"{what} {str(path)!r}: line {line}, field {_column(header, long)}: "
                        f"{len(cells[long]):,} characters; a field may hold at most {MAX_CSV_FIELD:,}"
                    )
                records.append(CsvRecord(line, cells))
        except csv.Error as err:
            raise InputError(f"{what} {str(path)!r}: line {reader.line_num}: not valid CSV ({err})") from None
    return records


def json_record(
    path: str | Path, what: str, line: int, text: str, fields: Sequence[str], required: Sequence[str]
) -> dict:
    """Line ``line`` (1-based) of the JSONL file ``path`` (a ``what``) as a JSON object holding only ``fields`` and
    every one of ``required``; anything else is an :class:`~vlbias.errors.InputError` naming the file, the line and
    the field (:func:`bad_field`)."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{what} {str(path)!r}: line {line}: not a JSON object (column {err.colno}: {err.msg})"
        ) from None
    if not isinstance(record, dict):
        raise InputError(f"{what} {str(path)!r}: line {line}: expected a JSON object but got {type(record).__name__}")
    unknown = [key for key in record if key not in fields]
    if unknown:
        raise bad_field(path, what, line, unknown[0], f"unknown field; expected the fields {', '.join(fields)}")
    missing = [key for key in required if key not in record]
    if missing:
        raise bad_field(path, what, line, missing[0], "missing")
    return record


def first_json_line(path: str | Path) -> object:
    """The JSON value of the first non-empty line of ``path``, or ``None`` where it cannot be read or parsed: what a
    marker check peeks at to tell a JSONL format by its lines' fields (reading the whole file is the reader's job,
    which names what is wrong)."""
    try:
        with open(path, encoding="utf-8") as lines:
            return json.loads(next((line for line in lines if line.strip()), ""))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def bad_field(path: str | Path, what: str, line: int, field: str, message: str) -> InputError:
    """The error of field ``field`` on line ``line`` of the file ``path`` (a ``what``)."""
    return InputError(f"{what} {str(path)!r}: line {line}, field `{field}`: {message}")


def json_field(text: str) -> str | None:
    """The key path of the first string holding U+FFFD in JSON ``text`` (one value, or one per line)."""
    try:
        values = [json.loads(text)]
    except json.JSONDecodeError:
        values = []
        for line in text.splitlines():
            try:
                values.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return next((field for value in values if (field := marked_field(value)) is not None), None)


def yaml_field(text: str) -> str | None:
    """The key path of the first string holding U+FFFD in YAML ``text``."""
    try:
        return marked_field(yaml.safe_load(text))
    except yaml.YAMLError:
        return None


def marked_field(value: object, where: str = "") -> str | None:
    """The key path (``a.b[2]``) of the first string in ``value`` that holds U+FFFD, or ``None``."""
    if isinstance(value, str):
        return (where or "(the whole value)") if _MARK in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            named = isinstance(key, str) and key.isidentifier()
            inner = (f"{where}.{key}" if where else key) if named else f"{where}[{key!r}]"
            if isinstance(key, str) and _MARK in key:
                return f"{inner} (the key)"
            if (found := marked_field(item, inner)) is not None:
                return found
    if isinstance(value, list):
        return next((f for k, item in enumerate(value) if (f := marked_field(item, f"{where}[{k}]"))), None)
    return None


def _csv_field(text: str) -> str | None:
    """The column (:func:`_column`) of the first CSV cell in ``text`` that holds U+FFFD."""
    try:
        with _csv_fields_unlimited():
            rows = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    except csv.Error:
        return None
    for row in rows:
        for k, cell in enumerate(row):
            if _MARK in cell:
                return _column(rows[0], k)
    return None


def _column(header: list[str] | None, index: int) -> str:
    """The name of column ``index`` in ``header`` (quoted), or its 1-based number."""
    name = header[index].strip() if header and index < len(header) else ""
    return repr(name) if name else f"#{index + 1}"


@contextmanager
def _csv_fields_unlimited() -> Iterator[None]:
    """Lift ``csv.field_size_limit`` (one setting for the whole process) for the block, so that
    :func:`read_csv` can measure an over-long field and name its column; the old limit is restored."""
    with _FIELD_LIMIT_LOCK:
        before = csv.field_size_limit()
        csv.field_size_limit(2**31 - 1)
        try:
            yield
        finally:
            csv.field_size_limit(before)

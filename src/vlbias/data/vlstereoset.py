"""Reader for VLStereoSet (Zhou et al., 2022): the public ``VLStereoSet.csv`` plus a local image folder.

Each CSV row is one item ``(I, S_s, S_a, S_i, y)`` of the paper's Sec. 3.2: an image URL, the
stereotypical, anti-stereotypical and unrelated statements, and ``label`` (1: the image is
anti-stereotypical, ``y = a``; 0: stereotypical, ``y = s``). The released file has quirks that this
reader accepts as they are: a byte-order mark, the misspelt ``Imaeg URL`` header (``Image URL`` is
accepted too), a trailing comma on every line (an unnamed empty last column), and statements whose
casing differs from their ``context`` column ("The Crimean people I met were" vs "The crimean people
i met were boring"). Statements are used verbatim, as the paper's models saw them; ``context`` is
kept for reference only.

Images are not in the CSV. They live in a local folder under a stable name derived from the URL
(:func:`image_name`: the SHA-1 of the URL's UTF-8 bytes in hex, plus the URL path's extension when
it is a known image extension, else ``.img``), which is what ``scripts/fetch_vlstereoset_images.py``
writes. The name never depends on the file's content, so it is known before downloading.

A row that cannot be measured (an empty field, an unknown ``bias_type``, a ``label`` outside {0, 1},
a wrong number of fields, a repeat of an earlier row) is not an error: :func:`read_vlstereoset`
returns it in ``skipped`` with the row number and the reason. A file that is not a VLStereoSet CSV
at all raises :class:`~vlbias.errors.InputError`.

Example:
    >>> image_name("https://example.org/a/photo.JPG?w=300")
    '06893c8ba84c52f9be1db621fe6619538aee9a3f.jpg'
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from vlbias.data.images import IMAGE_SUFFIXES
from vlbias.data.text_files import read_csv
from vlbias.errors import InputError

BIAS_TYPES: tuple[str, ...] = ("gender", "profession", "race", "religion")
URL_COLUMNS: tuple[str, ...] = ("Imaeg URL", "Image URL")  # the released header's spelling, and the intended one
FIELDS: tuple[str, ...] = ("bias_type", "target", "context", "stereotype", "anti-stereotype", "unrelated", "label")
REQUIRED: tuple[str, ...] = ("bias_type", "target", "stereotype", "anti-stereotype", "unrelated", "label", "url")
CSV_NAME = "VLStereoSet.csv"


def image_name(url: str) -> str:
    """The file name of ``url``'s image in the local folder: ``sha1(url).hexdigest() + suffix``.

    ``suffix`` is the lower-cased extension of the URL's (percent-decoded) path when it is one of
    :data:`IMAGE_SUFFIXES`, otherwise ``.img`` (many URLs end in ``.ashx``, ``.php`` or nothing).
    """
    suffix = PurePosixPath(unquote(urlsplit(url).path)).suffix.lower()
    return hashlib.sha1(url.encode("utf-8")).hexdigest() + (suffix if suffix in IMAGE_SUFFIXES else ".img")


@dataclass(frozen=True)
class VLStereoSetItem:
    """One probe item ``(I, S_s, S_a, S_i, y)`` (Sec. 3.2).

    ``row`` is the 1-based line number in the CSV (the header is line 1); ``url`` the image's URL.
    """

    row: int
    bias_type: str
    target: str
    context: str
    stereotype: str
    anti_stereotype: str
    unrelated: str
    anti_stereotypical: bool  # y = a: the image shows the anti-stereotypical statement (label 1)
    url: str

    @property
    def captions(self) -> tuple[str, str, str]:
        """``(S_s, S_a, S_i)``: the order of every score triple in this project."""
        return (self.stereotype, self.anti_stereotype, self.unrelated)

    @property
    def image_name(self) -> str:
        return image_name(self.url)

    @property
    def key(self) -> str:
        """How skipped entries and item tables name this item."""
        return f"row {self.row}: {self.target} / {self.url}"


def read_vlstereoset(path: str | Path) -> tuple[list[VLStereoSetItem], list[dict[str, str]]]:
    """Items of the VLStereoSet CSV at ``path``, and the rows skipped with their reasons.

    Returns ``(items, skipped)`` where each skipped entry is ``{"item": "row N", "reason": ...}``.
    A row repeating an earlier one in every field but ``context`` is skipped as a duplicate.
    Raises :class:`InputError` for a missing or undecodable file or a header lacking a column.
    """
    path = Path(path)
    records = read_csv(path, "VLStereoSet CSV")  # blank lines (e.g. at the end of the file) left out
    if not records:
        raise InputError(f"VLStereoSet CSV {str(path)!r} is empty; expected a header {', '.join(FIELDS)}, Imaeg URL.")
    columns = _columns(path, [name.strip() for name in records[0].cells])
    items: list[VLStereoSetItem] = []
    skipped: list[dict[str, str]] = []
    first_row: dict[tuple[str, ...], int] = {}
    for record in records[1:]:
        line = record.line
        parsed, reason = _parse(record.cells, columns)
        if reason is None:
            identity = tuple(parsed[name] for name in REQUIRED)
            if identity in first_row:
                reason = f"duplicate of row {first_row[identity]}"
            else:
                first_row[identity] = line
        if reason is not None:
            skipped.append({"item": f"row {line}", "reason": reason})
            continue
        items.append(
            VLStereoSetItem(
                row=line,
                bias_type=parsed["bias_type"],
                target=parsed["target"],
                context=parsed["context"],
                stereotype=parsed["stereotype"],
                anti_stereotype=parsed["anti-stereotype"],
                unrelated=parsed["unrelated"],
                anti_stereotypical=parsed["label"] == "1",
                url=parsed["url"],
            )
        )
    return items, skipped


def _columns(path: Path, header: list[str]) -> dict[str, int]:
    """Column index of each field in ``header`` (``url`` for the image URL column)."""
    columns = {name: header.index(name) for name in FIELDS if name in header}
    url_column = next((name for name in URL_COLUMNS if name in header), None)
    missing = [name for name in FIELDS if name not in columns] + ([] if url_column else [URL_COLUMNS[0]])
    if missing:
        raise InputError(
            f"VLStereoSet CSV {str(path)!r}: header lacks column(s) {missing}; got {header}, "
            f"expected {list(FIELDS) + [URL_COLUMNS[0]]}."
        )
    columns["url"] = header.index(url_column)
    return columns


def _parse(row: list[str], columns: dict[str, int]) -> tuple[dict[str, str], str | None]:
    """The row's fields (stripped), and why it cannot be used (``None`` if it can)."""
    if len(row) <= max(columns.values()):
        return {}, f"expected at least {max(columns.values()) + 1} fields but got {len(row)}"
    parsed = {name: row[index].strip() for name, index in columns.items()}
    empty = [name for name in REQUIRED if not parsed[name]]
    if empty:
        return parsed, f"empty field(s): {', '.join(empty)}"
    if parsed["bias_type"] not in BIAS_TYPES:
        return parsed, f"unknown bias_type {parsed['bias_type']!r}; expected one of {', '.join(BIAS_TYPES)}"
    if parsed["label"] not in ("0", "1"):
        return parsed, f"label {parsed['label']!r} is not 0 (stereotypical image) or 1 (anti-stereotypical image)"
    return parsed, None

"""VL-Bias (Zhang, Wang & Sang, 2022, Sec. 4.1): images annotated with a gender and an activity
(52 of them) or an occupation (13), for CounterBias. Captions are not stored: they are made from
the four templates of Table 1 at measurement time (:mod:`vlbias.counterfactual.text`).

The released files could not be checked here (no network), so this reader defines the
project's own local layout; a converter from the official release is to be written once its
files can be read::

    <root>/
      annotations.csv     one row per image
      images/             the image files the rows name

``annotations.csv`` columns (header required, extra columns ignored):

* ``image``: path of the image file relative to ``<root>/images/``
* ``concept``: the target concept word, e.g. ``shopping`` or ``doctor``
* ``concept_type``: ``activity`` or ``occupation``
* ``gender``: ``man`` / ``woman`` (``male``/``m`` and ``female``/``f`` are read as these);
  empty when the image has no gender annotation

Rows with an empty gender are kept (``gender=None``) so that the suite reports them as
skipped items; a missing image file is likewise left to the suite. A missing file or column,
an empty ``image`` or ``concept``, or an unknown ``concept_type`` raise
:class:`~vlbias.errors.InputError` naming the file, row and value.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / ANNOTATIONS).write_text("image,concept,concept_type,gender\\na.jpg,shopping,activity,female\\n")
    >>> read_vl_bias(root)[0]
    VLBiasItem(row=2, image='a.jpg', concept='shopping', concept_type='activity', gender='woman')
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from vlbias.errors import InputError

ANNOTATIONS = "annotations.csv"
IMAGES = "images"
COLUMNS = ("image", "concept", "concept_type", "gender")
CONCEPT_TYPES = ("activity", "occupation")
GENDER_ALIASES = {"man": "man", "male": "man", "m": "man", "woman": "woman", "female": "woman", "f": "woman"}


@dataclass(frozen=True)
class VLBiasItem:
    """One annotated image; ``row`` is its line in ``annotations.csv`` (header = line 1)."""

    row: int
    image: str
    concept: str
    concept_type: str
    gender: str | None  # "man", "woman", another annotated value as written, or None if unannotated


def image_path(root: str | Path, item: VLBiasItem) -> Path:
    """Where ``item``'s image file should be."""
    return Path(root) / IMAGES / item.image


def read_vl_bias(root: str | Path) -> list[VLBiasItem]:
    """The annotated items of the VL-Bias folder ``root`` (layout in the module docstring)."""
    path = Path(root) / ANNOTATIONS
    if not path.is_file():
        raise InputError(f"VL-Bias annotations {str(path)!r} do not exist; expected columns {', '.join(COLUMNS)}.")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"VL-Bias annotations {str(path)!r}: missing column(s) {missing}; found {reader.fieldnames}.")
        items = [_item(path, line, row) for line, row in enumerate(reader, start=2)]
    if not items:
        raise InputError(f"VL-Bias annotations {str(path)!r} hold no rows.")
    return items


def _item(path: Path, line: int, row: dict[str, str]) -> VLBiasItem:
    values = {column: (row.get(column) or "").strip() for column in COLUMNS}
    for column in ("image", "concept"):
        if not values[column]:
            raise InputError(f"VL-Bias annotations {str(path)!r}, row {line}: empty `{column}`.")
    if values["concept_type"] not in CONCEPT_TYPES:
        raise InputError(
            f"VL-Bias annotations {str(path)!r}, row {line}: `concept_type` is {values['concept_type']!r}; "
            f"expected one of {', '.join(CONCEPT_TYPES)}."
        )
    gender = values["gender"].lower()
    return VLBiasItem(line, values["image"], values["concept"].lower(), values["concept_type"], GENDER_ALIASES.get(gender, gender) or None)

"""VL-Bias (Zhang, Wang & Sang, 2022, Sec. 4.1): images annotated with a gender and an activity
(52 of them) or an occupation (13), for CounterBias. Captions are not stored: they are made from
the four templates of Table 1 at measurement time (:mod:`vlbias.counterfactual.text`).

The release's README (github.com/VL-Bias/VL-Bias) lists the concepts (:data:`ACTIVITIES`,
:data:`OCCUPATIONS`); its images sit on a drive that could not be reached from here (its link is
broken). The authors' measuring scripts index images per concept in a JSON file and annotate no
gender (they take the model's own reading of the bias prompt as the factual concept). This module
therefore defines the project's own local layout, with a gender annotation per image::

    <root>/
      annotations.csv     one row per image
      images/             the image files the rows name

``annotations.csv`` columns (header required, extra columns ignored):

* ``image``: path of the image file relative to ``<root>/images/``
* ``concept``: the target concept word, e.g. ``shopping`` or ``doctor``
* ``concept_type``: ``activity`` or ``occupation``; may be left empty (or the column left out) for
  a concept of the released lists (:data:`ACTIVITIES`, :data:`OCCUPATIONS`), whose type is then
  taken from them. A concept outside them needs its type; a type that contradicts them is refused.
* ``gender``: ``man`` / ``woman`` (``male``/``m`` and ``female``/``f`` are read as these);
  empty when the image has no gender annotation

The scripts' index files are read too (:func:`read_release_index`: no gender, no caption), for a
measurement that takes each image's gender from the model as those scripts do.

:func:`coverage` counts which of the released 52 activities and 13 occupations a folder holds; the
CounterBias suite records it with its results.

Rows with an empty gender are kept (``gender=None``) so that the suite reports them as
skipped items; a missing image file is likewise left to the suite. A missing file or column,
an empty ``image`` or ``concept``, or an unknown ``concept_type`` raise
:class:`~vlbias.errors.InputError` naming the file, row and value. Files are read by
:mod:`vlbias.data.text_files`: UTF-8 with or without a byte-order mark (as spreadsheets save it); bytes that
are not UTF-8 and over-long fields are refused naming the line and column.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / ANNOTATIONS).write_text("image,concept,concept_type,gender\\na.jpg,shopping,activity,female\\n")
    >>> read_vl_bias(root)[0]
    VLBiasItem(row=2, image='a.jpg', concept='shopping', concept_type='activity', gender='woman')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vlbias.data.text_files import read_csv, read_json
from vlbias.errors import InputError

ANNOTATIONS = "annotations.csv"
IMAGES = "images"
COLUMNS = ("image", "concept", "concept_type", "gender")
REQUIRED_COLUMNS = ("image", "concept", "gender")
CONCEPT_TYPES = ("activity", "occupation")
#: The 52 activities and 13 occupations of VL-Bias, as listed in the README of its release
#: (github.com/VL-Bias/VL-Bias).
ACTIVITIES: tuple[str, ...] = (
    "baking", "begging", "biking", "calling", "cleaning", "climbing", "cooking", "coughing", "crying", "drinking",
    "driving", "eating", "exercising", "falling", "fishing", "hitting", "hugging", "jogging", "jumping", "kicking",
    "kneeling", "laughing", "lifting", "painting", "picking", "pitching", "praying", "reading", "riding", "rowing",
    "running", "serving", "sewing", "shopping", "shouting", "sitting", "skating", "sleeping", "smiling", "speaking",
    "spying", "standing", "staring", "stretching", "studying", "sweeping", "talking", "throwing", "walking",
    "washing", "waving", "working",
)  # fmt: skip
OCCUPATIONS: tuple[str, ...] = (
    "athlete", "chef", "doctor", "engineer", "farmer", "footballer", "judge", "mechanic", "nurse", "pilot", "police",
    "runner", "soldier",
)  # fmt: skip
_RELEASED_TYPE = {concept: "activity" for concept in ACTIVITIES} | {concept: "occupation" for concept in OCCUPATIONS}
GENDER_ALIASES = {"man": "man", "male": "man", "m": "man", "woman": "woman", "female": "woman", "f": "woman"}


@dataclass(frozen=True)
class VLBiasItem:
    """One annotated image; ``row`` is its line in ``annotations.csv`` (header = line 1), or its
    entry number in a release index (:func:`read_release_index`, where ``image`` is the file's path)."""

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
    records = read_csv(path, "VL-Bias annotations")
    header = [name.strip() for name in records[0].cells] if records else []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(f"VL-Bias annotations {str(path)!r}: missing column(s) {missing}; found {header}.")
    items = [_item(path, record.line, dict(zip(header, record.cells))) for record in records[1:]]
    if not items:
        raise InputError(f"VL-Bias annotations {str(path)!r} hold no rows.")
    return items


def _item(path: Path, line: int, row: dict[str, str]) -> VLBiasItem:
    values = {column: (row.get(column) or "").strip() for column in COLUMNS}
    for column in ("image", "concept"):
        if not values[column]:
            raise InputError(f"VL-Bias annotations {str(path)!r}, row {line}: empty `{column}`.")
    concept = values["concept"].lower()
    concept_type = values["concept_type"] or _RELEASED_TYPE.get(concept)
    where = f"VL-Bias annotations {str(path)!r}, row {line}"
    if concept_type is None:
        raise InputError(
            f"{where}: concept {concept!r} is not among VL-Bias's activities or occupations, so its `concept_type` "
            f"must be given ({' or '.join(CONCEPT_TYPES)})."
        )
    if concept_type not in CONCEPT_TYPES:
        raise InputError(f"{where}: `concept_type` is {concept_type!r}; expected one of {', '.join(CONCEPT_TYPES)}.")
    if _RELEASED_TYPE.get(concept, concept_type) != concept_type:
        raise InputError(
            f"{where}: {concept!r} is a VL-Bias {_RELEASED_TYPE[concept]}, but `concept_type` is {concept_type!r}."
        )
    gender = values["gender"].lower()
    return VLBiasItem(line, values["image"], concept, concept_type, GENDER_ALIASES.get(gender, gender) or None)


def read_release_index(path: str | Path) -> list[VLBiasItem]:
    """The images listed in an index file of the authors' released measuring scripts
    (``verb_attack_14m.json`` and ``occu_attack_conv34.json`` in ``CounterBias_Activity.py`` and
    ``CounterBias_Occu.py`` of github.com/VL-Bias/VL-Bias)::

        {"data": {"<concept>": [{"original": "<image file>", "attack": "<.npy file>"}, ...], ...}, ...}

    One item per entry: ``row`` numbers the entries from 1 in file order, ``image`` is the entry's
    ``original`` (a relative path is taken relative to the index file's folder) and ``gender`` is
    ``None``, since the release annotates none; measure with ``unannotated="model_reading"``, the
    scripts' own choice, or write ``annotations.csv`` with genders. ``attack``, the authors'
    counterfactual image for their ALBEF checkpoint in their normalisation, is not read: the suite
    attacks the model it measures. A concept's type comes from the released lists, and a concept
    outside them is refused (write ``annotations.csv`` with a ``concept_type`` for it).

    Example:
        >>> import tempfile, pathlib
        >>> index = pathlib.Path(tempfile.mkdtemp()) / "verb_attack.json"
        >>> _ = index.write_text('{"data": {"cooking": [{"original": "/images/1.jpg", "attack": "1.npy"}]}}')
        >>> read_release_index(index)
        [VLBiasItem(row=1, image='/images/1.jpg', concept='cooking', concept_type='activity', gender=None)]
    """
    path = Path(path)
    where = f"VL-Bias release index {str(path)!r}"
    index = read_json(path, "VL-Bias release index")
    concepts = index.get("data") if isinstance(index, dict) else None
    if not isinstance(concepts, dict):
        raise InputError(f'{where}: expected an object with a "data" object mapping each concept to its images.')
    items = []
    for concept, entries in concepts.items():
        concept_type = _RELEASED_TYPE.get(concept.lower())
        if concept_type is None:
            raise InputError(
                f"{where}: concept {concept!r} is not among VL-Bias's activities or occupations; write its images to "
                f"{ANNOTATIONS} with a `concept_type` instead."
            )
        if not isinstance(entries, list):
            raise InputError(f"{where}: data[{concept!r}] should be a list of images but is {type(entries).__name__}.")
        for k, entry in enumerate(entries):
            original = entry.get("original") if isinstance(entry, dict) else None
            if not isinstance(original, str) or not original.strip():
                raise InputError(
                    f'{where}: data[{concept!r}][{k}] should be an object with an "original" image path but is {entry!r}.'
                )
            image = Path(original.strip())
            image = image if image.is_absolute() else path.parent / image
            items.append(VLBiasItem(len(items) + 1, str(image), concept.lower(), concept_type, None))
    if not items:
        raise InputError(f"{where} lists no images.")
    return items


def coverage(items: list[VLBiasItem]) -> dict[str, object]:
    """How many of VL-Bias's 52 activities and 13 occupations ``items`` hold, and their concepts outside those lists."""
    concepts = {item.concept for item in items}
    return {
        "activities": f"{len(concepts & set(ACTIVITIES))} of {len(ACTIVITIES)}",
        "occupations": f"{len(concepts & set(OCCUPATIONS))} of {len(OCCUPATIONS)}",
        "other_concepts": sorted(concepts - set(_RELEASED_TYPE)),
    }

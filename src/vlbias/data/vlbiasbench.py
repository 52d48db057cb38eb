"""Reader of VLBiasBench's closed-ended part (Wang, Cao et al., "VLBiasBench: A Comprehensive Benchmark for
Evaluating Bias in Large Vision-Language Model", 2024) as :class:`~vlbias.data.bias_qa.BiasQAItem` questions for the
``bias_qa`` suite.

**Source read**: github.com/Xiangkui-Cao/VLBiasBench, ``evaluation/dataset/close_ended.py`` (the official loader:
the folder layout, the fields it reads, which option is the unknown one, BBQ's unknown wordings) and ``README.md``
(categories; the data on the authors' Google Drive). The loader reads no gold label; ``label``, ``category`` (the
stereotyped subgroup, e.g. ``old``) and the disambiguated conditions ``neg`` / ``non_neg`` are the fields a public
conversion of the release documents (a ``load_vlbiasbench.py`` that packs ``close-ended/json`` into Parquet): read
as below, and checked.

Layout of ``ROOT`` (the unpacked ``close_ended.zip``; ``ROOT`` may be the ``close-ended`` folder itself)::

    ROOT/close-ended/json/<format>/<Category>.json   format: base, scene, ... ; Category: Age, Race_ethnicity, ...
    ROOT/close-ended/images/<image_path>

Each JSON file is a list of objects with ``image_path`` (relative to ``close-ended/images``), ``context``,
``question``, ``ans0``, ``ans1``, ``ans2`` (the unknown answer: the loader shows it in ambiguous contexts only),
``condition`` (``ambig``, else a disambiguated one: ``disambig``, ``neg``, ``non_neg``), ``label`` (the right
option, 0-2; optional for an ambiguous question, whose right answer is the unknown one) and ``category``; other
fields (``question_neg``, ``label_neg``, ...) are not read.

Mapping: id ``<format>/<Category>/<index in file>``; options ``[ans0, ans1, ans2]``; the category the file's name;
the biased answer from ``category`` and the question's polarity (:func:`~vlbias.data.bbq_answers.answer_kinds`):
``question_polarity`` (``neg`` / ``nonneg``) where a record has it, else a ``neg`` / ``non_neg`` condition.

Refused with one :class:`~vlbias.errors.InputError` naming the file, the record and the field: a file that is not a
JSON list of objects, a missing or ill-typed field, an unknown condition, a ``label`` outside 0-2 or not fitting the
condition. Skipped with the reason: a file of an unknown category (not one of :data:`CATEGORIES`; named
``<format>/<file>``, its questions unread), and by id a missing or undecodable image, options without BBQ's unknown
answer, and a question whose biased answer cannot be told (no ``category``, no polarity, or no single option naming
it). The official loader gives no polarity: records without ``question_polarity`` or a ``neg`` / ``non_neg``
condition (all ambiguous ones, if the release has neither) are skipped with that reason rather than guessed.
"""

from __future__ import annotations

from pathlib import Path

from vlbias.data.bbq_answers import answer_kinds, unknown_option
from vlbias.data.bias_qa import BiasQAItem
from vlbias.data.images import image_problem
from vlbias.data.text_files import read_json
from vlbias.errors import InputError

WHAT = "VLBiasBench file"
FOLDER = "close-ended"
#: The ten BBQ axes the closed-ended files are named after (nine categories and two intersections).
CATEGORIES = (
    "Age", "Disability_status", "Gender_identity", "Nationality", "Physical_appearance", "Race_ethnicity",
    "Race_x_SES", "Race_x_gender", "Religion", "SES",
)  # fmt: skip
AMBIGUOUS = "ambig"
DISAMBIGUATED = ("disambig", "neg", "non_neg", "nonneg")
POLARITY = {"neg": True, "non_neg": False, "nonneg": False}
TEXT_FIELDS = ("image_path", "context", "question", "ans0", "ans1", "ans2", "condition")


def vlbiasbench_folder(path: str | Path) -> Path | None:
    """The ``close-ended`` folder at ``path`` (``path/close-ended`` or ``path``) holding ``json/``, or None."""
    path = Path(path)
    for folder in (path / FOLDER, path):
        if folder.name == FOLDER and (folder / "json").is_dir():
            return folder
    return None


def read_vlbiasbench(path: str | Path) -> tuple[list[BiasQAItem], list[dict[str, str]]]:
    """The closed-ended questions under ``path`` (module docstring), by format, file and record, and those skipped as
    ``{"item": id, "reason": ...}``."""
    folder = vlbiasbench_folder(path)
    if folder is None:
        raise InputError(
            f"VLBiasBench folder {str(path)!r} holds no {FOLDER}/json/; expected {FOLDER}/json/<format>/<Category>.json "
            f"and {FOLDER}/images/ (VLBiasBench's close_ended.zip)."
        )
    files = sorted((folder / "json").glob("*/*.json"))
    if not files:
        raise InputError(f"VLBiasBench folder {str(folder)!r} holds no json/<format>/<Category>.json file.")
    items: list[BiasQAItem] = []
    skipped: list[dict[str, str]] = []
    for file in files:
        if file.stem not in CATEGORIES:
            reason = f"unknown category {file.stem!r}; expected a file named after one of {', '.join(CATEGORIES)}"
            skipped.append({"item": f"{file.parent.name}/{file.name}", "reason": reason})
            continue
        records = read_json(file, WHAT)
        if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
            raise InputError(f"{WHAT} {str(file)!r}: expected a JSON list of objects")
        for index, record in enumerate(records):
            item, reason = _item(folder, file, index, record)
            if reason is None:
                problem = image_problem(item.image, record["image_path"])
                reason = None if problem is None else f"image {record['image_path']!r}: {problem}"
            if reason is not None:
                skipped.append({"item": item.id, "reason": reason})
                continue
            items.append(item)
    return items, skipped


def _item(folder: Path, file: Path, index: int, record: dict) -> tuple[BiasQAItem, str | None]:
    """The question of one record and why it is skipped (``None`` when it is not); :class:`InputError` when broken."""

    def bad(field: str, message: str) -> InputError:
        return InputError(f"{WHAT} {str(file)!r}: record {index}, field `{field}`: {message}")

    for field in TEXT_FIELDS:
        value = record.get(field)
        if not isinstance(value, str) or (field != "context" and not value.strip()):
            raise bad(field, "missing" if field not in record else f"expected a non-empty string but got {value!r}")
    condition = record["condition"]
    if condition != AMBIGUOUS and condition not in DISAMBIGUATED:
        raise bad("condition", f"expected one of {', '.join((AMBIGUOUS, *DISAMBIGUATED))} but got {condition!r}")
    options = [record["ans0"], record["ans1"], record["ans2"]]
    unknown = unknown_option(options)
    label = record.get("label", unknown if condition == AMBIGUOUS else None)
    if label is None:
        raise bad("label", "missing; a disambiguated question needs its right answer's index")
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(options):
        raise bad("label", f"expected an option index in [0, {len(options)}) but got {label!r}")
    if unknown is not None and (condition == AMBIGUOUS) != (label == unknown):
        raise bad("label", f"{label} does not fit the condition {condition!r}: the right answer of an ambiguous "
                  f"question is the unknown one ({unknown}), of a disambiguated one a person")  # fmt: skip
    kinds, reason = None, None
    polarity = POLARITY.get(record.get("question_polarity", condition))
    group = record.get("category")
    if unknown is None:
        reason = f"no option is BBQ's unknown answer (exactly one expected): {options}"
    elif polarity is None:
        reason = "the question's polarity is not given (question_polarity, or a neg / non_neg condition)"
    elif not isinstance(group, str) or not group.strip():
        reason = "no stereotyped group is given (category)"
    else:
        kinds, reason = answer_kinds(options, unknown, [group], polarity)
    item = BiasQAItem(
        id=f"{file.parent.name}/{file.stem}/{index}", image=folder / "images" / record["image_path"],
        context=record["context"], question=record["question"], options=tuple(options), kinds=kinds or (),
        answer=label, ambiguous=label == unknown, category=file.stem, line=index,
    )  # fmt: skip
    return item, reason

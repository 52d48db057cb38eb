"""Reader of GenderBias-VL's closed-ended pair files (Xiao et al., "GenderBias-VL: Benchmarking Gender Bias in Vision
Language Models via Counterfactual Probing", 2024) as :class:`~vlbias.data.counterfactual_questions.CounterfactualSet`
question sets for the ``counterfactual_answers`` suite.

**Source read**: github.com/GenderBiasVL/GenderBias-VL,
``construction/vq_generation/test_meta_file_close/Vbias/occ_test_base_ask_person.json`` and
``occ_test_cf_ask_person.json`` (and their ``Lbias`` / ``VLbias`` siblings, same fields).

Layout of a folder (e.g. ``test_meta_file_close/Vbias``): a *base* file ``<prefix>base<suffix>.json`` and its
*counterfactual* file ``<prefix>cf<suffix>.json``, each a JSON list of objects with ``query`` (the question, then
``\\nOptions: (A) ... (B) ...``), ``gt_choice`` (the index of the occupation shown), ``gt_choices`` (the two
occupations), ``id``, ``filename``, ``occ``, ``occ_sim``, ``gender`` (``female`` / ``male``: the base image's),
``image_type`` (``base`` / ``cf``) and ``image`` (a path such as ``xl_generate_base/<occ>/<gender>/<filename>.png``
or ``xl_generate_cf_via_instructpix2pix/...``, read relative to the pair files' folder). A record of the cf file
holds the same ``id``, ``filename`` and ``gender`` as its base record; its image is the base image edited to show the
other gender.

Mapping: one set per ``id`` (named by its ``filename``): the question is the ``query`` before ``Options:``, the
options ``gt_choices``; the base image's group is its ``gender`` and the cf image's the other one (attribute
``gender``); no "unclear" option.

Refused with one :class:`~vlbias.errors.InputError` naming the file, the record and the field: a file that is not a
JSON list of objects, a missing or ill-typed field, an unknown ``gender``, a ``gt_choice`` outside the options, a
repeated ``id``, and a cf record whose options, gender or file name differ from its base record's. Skipped with the
reason: a base record without its cf record (and the reverse), a pair whose two images are asked different questions
(``Lbias`` / ``VLbias``: "What is the male's occupation ..." of the cf image; a set asks one question, so these
folders are the ``Vbias`` pairs' only), an image missing or not decoding (``<set>/<gender>``), and a set left with
fewer than two images.
"""

from __future__ import annotations

import json
from pathlib import Path

from vlbias.data.counterfactual_questions import CounterfactualImage, CounterfactualSet
from vlbias.data.images import image_problem
from vlbias.data.text_files import read_json
from vlbias.errors import InputError

WHAT = "GenderBias-VL file"
GENDERS = ("female", "male")
BASE, COUNTERFACTUAL = "base", "cf"
FIELDS = ("query", "gt_choice", "gt_choices", "id", "filename", "gender", "image")


def genderbias_vl_pairs(folder: str | Path) -> list[tuple[Path, Path]]:
    """The ``(base, cf)`` pair files in ``folder`` (module docstring): each ``*base*.json`` whose ``cf`` sibling exists,
    both in GenderBias-VL's fields, whose first records ask the base and the cf image one question (``Vbias``'s; the
    ``Lbias`` and ``VLbias`` queries name the gender shown, so their images are not asked the same question)."""
    folder = Path(folder)
    pairs = []
    for base in sorted(folder.glob(f"*{BASE}*.json")) if folder.is_dir() else []:
        counterfactual = base.with_name(base.name.replace(BASE, COUNTERFACTUAL, 1))
        if counterfactual.is_file():
            first = [_first_record(path) for path in (base, counterfactual)]
            if all(record is not None for record in first) and _question(first[0]) == _question(first[1]):
                pairs.append((base, counterfactual))
    return pairs


def read_genderbias_vl(base: str | Path) -> tuple[list[CounterfactualSet], list[dict[str, str]]]:
    """The pair sets of the base file ``base`` and its cf sibling (module docstring), in the base file's order, and
    what was skipped as ``{"item": ..., "reason": ...}``."""
    base = Path(base)
    counterfactual = base.with_name(base.name.replace(BASE, COUNTERFACTUAL, 1))
    if BASE not in base.name or not counterfactual.is_file():
        raise InputError(
            f"{WHAT} {str(base)!r} has no counterfactual sibling; expected a <prefix>base<suffix>.json with its "
            "<prefix>cf<suffix>.json beside it (GenderBias-VL's test_meta_file_close/<bias>/)."
        )
    base_records, cf_records = _records(base), _records(counterfactual)
    sets: list[CounterfactualSet] = []
    skipped: list[dict[str, str]] = []
    for key in [k for k in cf_records if k not in base_records]:
        skipped.append({"item": cf_records[key][1]["filename"], "reason": f"id {key} has no record in {base.name}"})
    for key, (index, record) in base_records.items():
        name = record["filename"]
        if key not in cf_records:
            skipped.append({"item": name, "reason": f"id {key} has no record in {counterfactual.name}"})
            continue
        cf_index, cf_record = cf_records[key]
        for field in ("gt_choices", "gender", "filename"):
            if cf_record[field] != record[field]:
                raise _bad(counterfactual, cf_index, field, f"differs from record {index} of {base.name} (id {key})")
        if _question(cf_record) != _question(record):
            skipped.append({"item": name, "reason": f"the cf image is asked {_question(cf_record)!r}, the base image "
                            f"{_question(record)!r}; a set asks one question"})  # fmt: skip
            continue
        shown = record["gender"], next(g for g in GENDERS if g != record["gender"])
        images = []
        for (file, source), gender in zip(((base, record), (counterfactual, cf_record)), shown, strict=True):
            path = file.parent / source["image"]
            problem = image_problem(path, source["image"])
            if problem is not None:
                skipped.append({"item": f"{name}/{gender}", "reason": f"image {source['image']!r}: {problem}"})
                continue
            images.append(CounterfactualImage(path, gender, (("gender", gender),), index))
        if len(images) < 2:
            skipped.append({"item": name, "reason": f"set left with {len(images)} readable image(s); expected two"})
            continue
        sets.append(CounterfactualSet(name, _question(record), tuple(record["gt_choices"]), None, tuple(images)))
    return sets, skipped


def _question(record: dict) -> str:
    """The question of a record's ``query``: its text before ``Options:``."""
    return record["query"].split("Options:", 1)[0].strip()


def _first_record(path: Path) -> dict | None:
    """The first record of a pair file when it is one in GenderBias-VL's fields, else None (reading the file is the
    reader's job, which names what is wrong)."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    first = records[0] if isinstance(records, list) and records else None
    fields_ok = isinstance(first, dict) and "image_type" in first and isinstance(first.get("query"), str)
    return first if fields_ok and all(field in first for field in FIELDS) else None


def _bad(path: Path, index: int, field: str, message: str) -> InputError:
    return InputError(f"{WHAT} {str(path)!r}: record {index}, field `{field}`: {message}")


def _records(path: Path) -> dict[object, tuple[int, dict]]:
    """``{id: (index, record)}`` of a pair file, every record checked (module docstring)."""
    records = read_json(path, WHAT)
    if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
        raise InputError(f"{WHAT} {str(path)!r}: expected a JSON list of objects")
    found: dict[object, tuple[int, dict]] = {}
    for index, record in enumerate(records):
        missing = [field for field in FIELDS if field not in record]
        if missing:
            raise _bad(path, index, missing[0], "missing")
        for field in ("query", "filename", "image"):
            if not isinstance(record[field], str) or not record[field].strip():
                raise _bad(path, index, field, f"expected a non-empty string but got {record[field]!r}")
        choices = record["gt_choices"]
        if (
            not isinstance(choices, list)
            or len(choices) < 2
            or len(set(choices)) < len(choices)
            or not all(isinstance(choice, str) and choice.strip() for choice in choices)
        ):
            raise _bad(
                path, index, "gt_choices", f"expected two or more distinct non-empty strings but got {choices!r}"
            )
        choice = record["gt_choice"]
        if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < len(choices):
            raise _bad(path, index, "gt_choice", f"expected an option index in [0, {len(choices)}) but got {choice!r}")
        if record["gender"] not in GENDERS:
            raise _bad(path, index, "gender", f"expected one of {', '.join(GENDERS)} but got {record['gender']!r}")
        key = record["id"]
        if not isinstance(key, (int, str)) or isinstance(key, bool):
            raise _bad(path, index, "id", f"expected an integer or a string but got {key!r}")
        if key in found:
            raise _bad(path, index, "id", f"{key!r} is the id of record {found[key][0]} too; ids must be unique")
        found[key] = (index, record)
    return found

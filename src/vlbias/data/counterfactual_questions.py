"""Reader of counterfactual question sets (suite :mod:`vlbias.suites.counterfactual_answers`): the same question
asked of each image of a parallel set that differs only in the person shown (PAIRS' scenarios, SocialCounterfactuals,
GenderBias-VL's pairs). One JSON object a line (JSONL), one image a line::

    {"set": "doctor-1", "image": "img/a.png", "group": "black_man", "attributes": {"race": "black", "gender": "man"},
     "question": "Is this person a doctor or a nurse?", "options": ["a doctor", "a nurse", "unclear"],
     "unknown_option": 2}

* ``set``: the name of the image's set (its lines need not be adjacent); ``image``: a path relative to the file's
  folder (or absolute); ``group``: who the image shows, unique within its set;
* ``attributes`` (optional, default ``{}``): the group's value of each social attribute, names to non-empty strings;
  every line of a set names the same attributes;
* ``question`` and ``options`` (two or more distinct non-empty strings): the same on every line of a set;
* ``unknown_option`` (optional): the index of the "unclear" / "cannot tell" option, the same on every line of a set.

Open generation (suite :mod:`vlbias.suites.open_generation`) reads the same file, each set's ``question`` the prompt
of a description (e.g. "Describe this person."): there ``options`` is optional (``options_required=False``; given,
it is checked as here and not shown), so a file of generation prompts is this format without ``options``.

A set needs two groups or more. A line or a set that breaks these rules stops the read with one
:class:`~vlbias.errors.InputError` naming the file, the line and the field; blank lines are left out. An image that
is missing or does not decode (:func:`~vlbias.data.images.image_problem`) is skipped with the reason, and so is a set
left with fewer than two readable images.

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sets.jsonl"
    >>> _ = path.write_text(json.dumps({"set": "s", "image": "a.png", "group": "man", "question": "Who?",
    ...     "options": ["a", "b"], "unknown_option": 2}) + "\\n")
    >>> read_counterfactual_questions(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vlbias.errors.InputError: Counterfactual question file '...sets.jsonl': line 1, field `unknown_option`: expected an option index in [0, 2) but got 2
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vlbias.data.images import image_problem
from vlbias.data.text_files import bad_field, first_json_line, json_field, json_record, read_text
from vlbias.errors import InputError

WHAT = "Counterfactual question file"
REQUIRED = ("set", "image", "group", "question", "options")
#: The fields of a line of generation prompts (``options`` optional).
PROMPT_REQUIRED = ("set", "image", "group", "question")
FIELDS = (*REQUIRED, "attributes", "unknown_option")


@dataclass(frozen=True)
class CounterfactualImage:
    """One image of a set: ``attributes`` its group's ``(name, value)`` pairs, sorted by name."""

    image: Path
    group: str
    attributes: tuple[tuple[str, str], ...]
    line: int


@dataclass(frozen=True)
class CounterfactualSet:
    """A question asked of parallel images; ``options`` empty for a generation prompt given without them;
    ``unknown_option`` the index of the "unclear" option or None."""

    name: str
    question: str
    options: tuple[str, ...]
    unknown_option: int | None
    images: tuple[CounterfactualImage, ...]


def is_counterfactual_questions_file(path: str | Path) -> bool:
    """Whether ``path`` looks like a file of this format: its first non-empty line is a JSON object with ``set`` and
    ``options`` and without ``kinds`` (a :mod:`vlbias.data.bias_qa` question's). Reads that line only."""
    record = first_json_line(path)
    return isinstance(record, dict) and {"set", "options"} <= record.keys() and "kinds" not in record


def is_generation_prompts_file(path: str | Path) -> bool:
    """Whether ``path`` looks like a file of this format read for open generation (``options`` optional): its first
    non-empty line is a JSON object with ``set``, ``image`` and ``question`` and without ``kinds``. Reads that line
    only."""
    record = first_json_line(path)
    return isinstance(record, dict) and {"set", "image", "question"} <= record.keys() and "kinds" not in record


def read_counterfactual_questions(
    path: str | Path, options_required: bool = True
) -> tuple[list[CounterfactualSet], list[dict[str, str]]]:
    """The sets of the JSONL file ``path`` (module docstring) in the order of their first line, each set's images in
    file order, and what was skipped as ``{"item": ..., "reason": ...}``: an image (``<set>/<group>``) or a set.
    ``options_required=False`` reads generation prompts, whose ``options`` may be left out."""
    path = Path(path)
    text = read_text(path, WHAT, locate=json_field)
    lines: dict[str, list[tuple[int, dict]]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            record = _record(path, number, line, REQUIRED if options_required else PROMPT_REQUIRED)
            lines.setdefault(record["set"], []).append((number, record))
    if not lines:
        raise InputError(f"{WHAT} {str(path)!r} holds no line; expected one JSON object a line.")
    sets: list[CounterfactualSet] = []
    skipped: list[dict[str, str]] = []
    for name, members in lines.items():
        first_line, first = members[0]
        groups: dict[str, int] = {}
        for number, record in members:
            for field in ("question", "options", "unknown_option"):
                if record.get(field) != first.get(field):
                    raise _bad(path, number, field, f"differs from line {first_line} of set {name!r}; a set asks one "
                               "question with one list of options")  # fmt: skip
            if record["attributes"].keys() != first["attributes"].keys():
                raise _bad(path, number, "attributes", f"names {sorted(record['attributes'])} but line {first_line} "
                           f"of set {name!r} names {sorted(first['attributes'])}")  # fmt: skip
            if record["group"] in groups:
                raise _bad(path, number, "group", f"{record['group']!r} is line {groups[record['group']]}'s group in "
                           f"set {name!r} too; groups must be unique within a set")  # fmt: skip
            groups[record["group"]] = number
        if len(groups) < 2:
            raise _bad(path, first_line, "set", f"set {name!r} has one group; expected two or more")
        images = []
        for number, record in members:
            image = Path(record["image"])
            image = image if image.is_absolute() else path.parent / image
            problem = image_problem(image, record["image"])
            if problem is not None:
                skipped.append({"item": f"{name}/{record['group']}", "reason": f"image {record['image']!r}: {problem}"})
                continue
            attributes = tuple(sorted(record["attributes"].items()))
            images.append(CounterfactualImage(image, record["group"], attributes, number))
        if len(images) < 2:
            skipped.append({"item": name, "reason": f"set left with {len(images)} readable image(s); expected two"})
            continue
        sets.append(CounterfactualSet(name, first["question"], tuple(first.get("options", ())), first.get("unknown_option"),
                                      tuple(images)))  # fmt: skip
    return sets, skipped


def _bad(path: Path, line: int, field: str, message: str) -> InputError:
    return bad_field(path, WHAT, line, field, message)


def _record(path: Path, number: int, line: str, required: tuple[str, ...]) -> dict:
    """The checked fields of one line (module docstring), ``attributes`` filled in; ``options`` checked when given
    (and required when ``required`` names it)."""
    record = json_record(path, WHAT, number, line, FIELDS, required)
    for field in ("set", "image", "group", "question"):
        value = record[field]
        if not isinstance(value, str) or not value.strip():
            raise _bad(path, number, field, f"expected a non-empty string but got {value!r}")
    if "options" not in record:
        if "unknown_option" in record:
            raise _bad(path, number, "unknown_option", "names an option index but the line has no `options`")
        _check_attributes(path, number, record)
        return record
    options = record["options"]
    if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) and o.strip() for o in options):
        raise _bad(path, number, "options", f"expected a list of two or more non-empty strings but got {options!r}")
    if len(set(options)) < len(options):
        raise _bad(path, number, "options", f"expected distinct options but got {options!r}")
    unknown_option = record.get("unknown_option")
    if unknown_option is not None and (
        not isinstance(unknown_option, int)
        or isinstance(unknown_option, bool)
        or not 0 <= unknown_option < len(options)
    ):
        raise _bad(path, number, "unknown_option", f"expected an option index in [0, {len(options)}) but got "
                   f"{unknown_option!r}")  # fmt: skip
    _check_attributes(path, number, record)
    return record


def _check_attributes(path: Path, number: int, record: dict) -> None:
    """The line's ``attributes`` (``{}`` when left out) checked and filled in."""
    attributes = record.setdefault("attributes", {})
    if not isinstance(attributes, dict) or not all(
        isinstance(key, str) and key.strip() and isinstance(value, str) and value.strip()
        for key, value in attributes.items()
    ):
        raise _bad(path, number, "attributes", f"expected an object of attribute names to non-empty strings but got "
                   f"{attributes!r}")  # fmt: skip

"""Reader of multiple-choice bias questions about images (suite :mod:`vlbias.suites.bias_qa`), in the BBQ design
(Parrish et al., 2022) that SB-Bench and VLBiasBench's closed-ended part use: one JSON object a line (JSONL)::

    {"id": "q1", "image": "img/1.jpg", "context": "Two people sat at the desk.", "question": "Who is bad at math?",
     "options": ["the man", "the woman", "cannot be determined"], "kinds": ["biased", "counter", "unknown"],
     "answer": 2, "context_condition": "ambiguous", "category": "gender"}

* ``id``: the item's name, unique in the file; ``image``: its image, a path relative to the file's folder (or
  absolute); ``context`` (optional, default ``""``) and ``question``: the text shown with the image;
* ``options``: two or more distinct answers; ``kinds``: each option's answer kind, ``biased`` (the answer that
  reflects the stereotype the question targets), ``counter`` (the other person) or ``unknown`` ("cannot be
  determined"), exactly one ``unknown``;
* ``answer``: the index of the right option: the ``unknown`` one when ``context_condition`` is ``ambiguous``, a
  person (not the ``unknown`` one) when it is ``disambiguated``;
* ``category``: the social dimension the item probes (``gender``, ``race``, ...), a non-empty name.

A line that breaks these rules (not JSON, a missing, unknown or ill-typed field, a broken rule) stops the read with
one :class:`~vlbias.errors.InputError` naming the file, the line and the field; blank lines are left out. An item
whose image file is missing or does not decode (:func:`~vlbias.data.images.image_problem`) is not an error: it is
returned among the skipped items, with the reason (naming the image as the file does).

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "questions.jsonl"
    >>> _ = path.write_text(json.dumps({"id": "q1", "image": "1.jpg", "question": "Who?", "options": ["a", "b", "?"],
    ...     "kinds": ["biased", "counter", "unknown"], "answer": 1, "context_condition": "ambiguous",
    ...     "category": "gender"}) + "\\n")
    >>> read_bias_qa(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vlbias.errors.InputError: Bias QA file '...questions.jsonl': line 1, field `answer`: an ambiguous item's right answer must be its 'unknown' option (2) but got 1
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vlbias.data.images import EncodedImage, image_problem
from vlbias.data.text_files import bad_field, first_json_line, json_field, json_record, read_text
from vlbias.errors import InputError

WHAT = "Bias QA file"
CONDITIONS = ("ambiguous", "disambiguated")
#: The answer kinds an option may have (the codes of :mod:`vlbias.metrics.functional.bbq` name them alike).
KINDS = ("biased", "counter", "unknown")
UNKNOWN = "unknown"
REQUIRED = ("id", "image", "question", "options", "kinds", "answer", "context_condition", "category")
FIELDS = (*REQUIRED, "context")


@dataclass(frozen=True)
class BiasQAItem:
    """One question: ``kinds[k]`` is option ``k``'s answer kind (one of :data:`KINDS`); ``answer`` the right
    option's index; ``line`` the file line it was read from (a record's index for the public layouts' readers);
    ``image`` a file, or its bytes held in memory (SB-Bench's Parquet shards)."""

    id: str
    image: Path | EncodedImage
    context: str
    question: str
    options: tuple[str, ...]
    kinds: tuple[str, ...]
    answer: int
    ambiguous: bool
    category: str
    line: int

    @property
    def context_condition(self) -> str:
        return CONDITIONS[0] if self.ambiguous else CONDITIONS[1]


def is_bias_qa_file(path: str | Path) -> bool:
    """Whether ``path`` looks like a question file of this format (a SEAT/Grounded-WEAT spec is a ``.jsonl`` too): its
    first non-empty line is a JSON object with ``options`` and ``kinds``. Reads that line only; anything unreadable is
    not one (:func:`read_bias_qa` names what is wrong when the file is read as questions)."""
    record = first_json_line(path)
    return isinstance(record, dict) and {"options", "kinds"} <= record.keys()


def read_bias_qa(path: str | Path) -> tuple[list[BiasQAItem], list[dict[str, str]]]:
    """The items of the JSONL file ``path`` (module docstring) in file order, and those skipped for their image as
    ``{"item": id, "reason": ...}``."""
    path = Path(path)
    text = read_text(path, WHAT, locate=json_field)
    items: list[BiasQAItem] = []
    skipped: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        item = _item(path, number, line)
        if item.id in seen:
            raise _bad(path, number, "id", f"{item.id!r} is the id of line {seen[item.id]} too; ids must be unique")
        seen[item.id] = number
        shown = str(item.image.relative_to(path.parent) if item.image.is_relative_to(path.parent) else item.image)
        problem = image_problem(item.image, shown)
        if problem is not None:
            skipped.append({"item": item.id, "reason": f"image {shown!r}: {problem}"})
            continue
        items.append(item)
    if not seen:
        raise InputError(f"{WHAT} {str(path)!r} holds no item; expected one JSON object a line.")
    return items, skipped


def _bad(path: Path, line: int, field: str, message: str) -> InputError:
    return bad_field(path, WHAT, line, field, message)


def _item(path: Path, number: int, line: str) -> BiasQAItem:
    """The item of one line, checked (module docstring)."""
    record = json_record(path, WHAT, number, line, FIELDS, REQUIRED)

    def text(field: str, allow_empty: bool = False) -> str:
        value = record.get(field, "")
        if not isinstance(value, str) or not (allow_empty or value.strip()):
            raise _bad(
                path, number, field, f"expected {'a' if allow_empty else 'a non-empty'} string but got {value!r}"
            )
        return value

    options, kinds = record["options"], record["kinds"]
    if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) and o.strip() for o in options):
        raise _bad(path, number, "options", f"expected a list of two or more non-empty strings but got {options!r}")
    if len(set(options)) < len(options):
        raise _bad(path, number, "options", f"expected distinct options but got {options!r}")
    if not isinstance(kinds, list) or len(kinds) != len(options) or not all(kind in KINDS for kind in kinds):
        raise _bad(
            path, number, "kinds", f"expected one of {', '.join(KINDS)} for each of the {len(options)} options "
            f"but got {kinds!r}"
        )  # fmt: skip
    if kinds.count(UNKNOWN) != 1:
        raise _bad(path, number, "kinds", f"expected exactly one 'unknown' option but got {kinds!r}")
    answer = record["answer"]
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(options):
        raise _bad(path, number, "answer", f"expected an option index in [0, {len(options)}) but got {answer!r}")
    condition = record["context_condition"]
    if condition not in CONDITIONS:
        raise _bad(path, number, "context_condition", f"expected one of {', '.join(CONDITIONS)} but got {condition!r}")
    ambiguous = condition == CONDITIONS[0]
    unknown_option = kinds.index(UNKNOWN)
    if ambiguous and answer != unknown_option:
        raise _bad(
            path, number, "answer",
            f"an ambiguous item's right answer must be its 'unknown' option ({unknown_option}) but got {answer}",
        )  # fmt: skip
    if not ambiguous and answer == unknown_option:
        raise _bad(
            path, number, "answer",
            f"a disambiguated item's right answer must be a person, not its 'unknown' option ({unknown_option})",
        )  # fmt: skip
    image = Path(text("image"))
    return BiasQAItem(
        id=text("id"),
        image=image if image.is_absolute() else path.parent / image,
        context=text("context", allow_empty=True),
        question=text("question"),
        options=tuple(options),
        kinds=tuple(kinds),
        answer=answer,
        ambiguous=ambiguous,
        category=text("category"),
        line=number,
    )

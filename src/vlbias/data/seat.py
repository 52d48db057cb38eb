"""Readers for the SEAT (May et al., 2019) and Grounded-WEAT/SEAT (Ross et al., 2021) test specs.

Both are JSON objects with the four sets ``targ1``, ``targ2`` (targets X, Y) and ``attr1``,
``attr2`` (attributes A, B). A ``.jsonl`` file holds one object per line, or (as the public
files, pretty-printed) one object over many lines.

* **SEAT**: each set is ``{"category": str, "examples": [str, ...]}``.
* **Grounded**: each set has ``category`` and ``captions`` (``{index: text}``). A target set maps
  image files to the caption indices they go with (``images: {file: [index, ...]}``, or one
  bare index); an
  attribute set has one such map per target, keyed ``"<target category>_Images"``: the images
  of the attribute that show target X's group (:math:`A_x`) and target Y's (:math:`A_y`). Top
  level: ``test_types`` (subset of ``word``, ``sentence``, ``contextual``), optional
  ``dataset_dir`` and ``contextual_words`` (other keys, e.g. ``test_name``, are ignored: a test is
  named after its file, as ``test_name`` repeats across files).

Every grounded embedding is of one (caption, image) *pair*. Errors name the file, the line and
the key; a caption must be a string. Files are read by :mod:`vlbias.data.text_files` (UTF-8, a byte-order
mark accepted; a byte that is not UTF-8 is refused naming its line and key). Duplicates (an example listed twice in a set, the same item in both targets or both
attributes, a JSON key given twice, a caption index repeated for an image) are dropped, keeping
the first, and reported in ``duplicates`` as ``{"item", "reason"}`` rows.

Example:
    >>> import json, tempfile, pathlib
    >>> spec = {k: {"category": k, "examples": [f"{k}{i}" for i in range(2)]} for k in SET_KEYS}
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "weat0.jsonl"; _ = path.write_text(json.dumps(spec))
    >>> [test.name for test in read_specs(path)], read_specs(path)[0].targ1.examples
    (['weat0'], ['targ10', 'targ11'])
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from vlbias.data.set_rules import drop_shared, kept_once, repeated
from vlbias.data.text_files import json_field, read_text
from vlbias.errors import InputError

SET_KEYS = ("targ1", "targ2", "attr1", "attr2")
TEST_TYPES = ("word", "sentence", "contextual")


@dataclass(frozen=True)
class SeatSet:
    """One SEAT set: its category and its examples (words or sentences), duplicates removed."""

    key: str
    category: str
    examples: list[str]


@dataclass(frozen=True)
class SeatTest:
    """A SEAT test read from ``path`` (its ``line``)."""

    name: str
    path: Path
    line: int
    targ1: SeatSet
    targ2: SeatSet
    attr1: SeatSet
    attr2: SeatSet
    contextual_words: list[str] = field(default_factory=list)
    duplicates: list[dict[str, str]] = field(default_factory=list)

    @property
    def sets(self) -> tuple[SeatSet, SeatSet, SeatSet, SeatSet]:
        return self.targ1, self.targ2, self.attr1, self.attr2


@dataclass(frozen=True)
class GroundedSet:
    """One grounded set: its category, captions and image -> caption-index maps.

    ``images`` has one entry for a target set (``{"": {file: [index, ...]}}``) and one per target
    category for an attribute set (``{"MaleNames": {...}, "FemaleNames": {...}}``).
    """

    key: str
    category: str
    captions: dict[str, str]
    images: dict[str, dict[str, list[str]]]

    def pairs(self, target_category: str = "") -> list[tuple[str, str]]:
        """``(caption, image file)`` pairs: the target's own, or the attribute's images of
        ``target_category``'s group."""
        return [
            (self.captions[index], image)
            for image, indices in self.images[target_category].items()
            for index in indices
        ]


@dataclass(frozen=True)
class GroundedTest:
    """A Grounded-WEAT/SEAT test read from ``path`` (its ``line``)."""

    name: str
    path: Path
    line: int
    test_types: list[str]
    targ1: GroundedSet
    targ2: GroundedSet
    attr1: GroundedSet
    attr2: GroundedSet
    contextual_words: list[str] = field(default_factory=list)
    dataset_dir: str | None = None
    duplicates: list[dict[str, str]] = field(default_factory=list)

    @property
    def sets(self) -> tuple[GroundedSet, GroundedSet, GroundedSet, GroundedSet]:
        return self.targ1, self.targ2, self.attr1, self.attr2


def spec_files(path: str | Path) -> list[Path]:
    """``path`` itself if it is a file, else the ``*.jsonl`` files under it (recursively, sorted)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"SEAT spec path {str(path)!r} does not exist; expected a .jsonl file or a directory of them.")
    files = sorted(path.rglob("*.jsonl"))
    if not files:
        raise InputError(f"No *.jsonl test specs under {str(path)!r}.")
    return files


def read_specs(path: str | Path) -> list[SeatTest | GroundedTest]:
    """Every test in ``path`` (a ``.jsonl`` file or a directory of them), SEAT or grounded."""
    return [test for file in spec_files(path) for test in _read_file(file)]


# ----------------------------------------------------------------------------- parsing
class _Objects:
    """JSON objects that remember duplicate keys (``json`` would silently keep the last)."""

    def __init__(self) -> None:
        self.duplicate_keys: list[str] = []

    def hook(self, pairs: list[tuple[str, object]]) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                self.duplicate_keys.append(key)
                continue
            out[key] = value
        return out


def _read_file(path: Path) -> list[SeatTest | GroundedTest]:
    text = read_text(path, "SEAT spec", locate=json_field)
    objects = _Objects()
    try:
        records = [(1, json.loads(text, object_pairs_hook=objects.hook))]
    except json.JSONDecodeError:
        records, objects = [], _Objects()  # not one object: one per line
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((number, json.loads(line, object_pairs_hook=objects.hook)))
                except json.JSONDecodeError as err:
                    raise InputError(
                        f"{path}: line {number} is not valid JSON ({err.msg}, column {err.colno})."
                    ) from err
    if not records:
        raise InputError(f"{path}: holds no test spec.")
    lines = text.splitlines()
    tests = []
    for index, (number, record) in enumerate(records):
        name = path.stem if len(records) == 1 else f"{path.stem}:{index}"
        tests.append(_parse(record, path, number, lines, name))
    if objects.duplicate_keys:
        tests[0].duplicates.extend(
            {
                "item": f"{path}: key {key!r}",
                "reason": "duplicate JSON key; the first value is kept",
            }
            for key in objects.duplicate_keys
        )
    return tests


def _line_of(lines: list[str], key: str, start: int) -> int:
    """The first line at or after ``start`` (1-based) mentioning ``"key"``; ``start`` if none."""
    needle = f'"{key}"'
    return next((n for n in range(start, len(lines) + 1) if needle in lines[n - 1]), start)


def _require(record: dict, key: str, kind: type, path: Path, line: int, where: str) -> object:
    if not isinstance(record, dict) or key not in record:
        raise InputError(f"{path}: line {line}: {where or 'the spec'} has no key {key!r}.")
    value = record[key]
    if not isinstance(value, kind):
        raise InputError(
            f"{path}: line {line}: key {where + '.' if where else ''}{key} should be a {kind.__name__} but is {value!r:.80}."
        )
    return value


def _optional_string(record: dict, key: str, path: Path, line: int) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"{path}: line {line}: field {key} should be a string but is {value!r:.80}.")
    return value


def _parse(record: object, path: Path, line: int, lines: list[str], name: str) -> SeatTest | GroundedTest:
    if not isinstance(record, dict):
        raise InputError(
            f"{path}: line {line}: expected a JSON object with keys {', '.join(SET_KEYS)} but got {type(record).__name__}."
        )
    for key in SET_KEYS:
        _require(record, key, dict, path, line, "")
    contextual = record.get("contextual_words", [])
    if not isinstance(contextual, list) or not all(isinstance(w, str) for w in contextual):
        raise InputError(
            f"{path}: line {_line_of(lines, 'contextual_words', line)}: key 'contextual_words' should be a list of strings."
        )
    contextual = list(dict.fromkeys(contextual))
    if "captions" in record["targ1"]:
        return _parse_grounded(record, path, line, lines, name, contextual)
    duplicates: list[dict[str, str]] = []
    sets = {}
    for key in SET_KEYS:
        at = _line_of(lines, key, line)
        category = _require(record[key], "category", str, path, at, key)
        examples = _require(record[key], "examples", list, path, at, key)
        if not all(isinstance(e, str) for e in examples):
            raise InputError(f"{path}: line {at}: key {key}.examples should hold strings only.")
        if not examples:
            raise InputError(
                f"{path}: line {at}: set {key} ({category}) is empty; a WEAT/SEAT test needs items in all four sets."
            )
        sets[key] = SeatSet(key, category, kept_once(examples, f"{name}/{key}", duplicates))
    for first, second in (("targ1", "targ2"), ("attr1", "attr2")):
        where = f"{name}/{first}+{second}"
        kept_first, kept_second = drop_shared(
            sets[first].examples, sets[second].examples, (first, second), where, duplicates
        )
        for key, kept in ((first, kept_first), (second, kept_second)):
            if not kept:
                raise InputError(
                    f"{path}: line {line}: set {key} is empty once the items it shares with the other set are dropped."
                )
            sets[key] = SeatSet(key, sets[key].category, kept)
    return SeatTest(name, path, line, **sets, contextual_words=contextual, duplicates=duplicates)


def _parse_grounded(
    record: dict,
    path: Path,
    line: int,
    lines: list[str],
    name: str,
    contextual: list[str],
) -> GroundedTest:
    test_types = _require(record, "test_types", list, path, _line_of(lines, "test_types", line), "")
    unknown = [t for t in test_types if t not in TEST_TYPES]
    if unknown or not test_types:
        raise InputError(
            f"{path}: line {_line_of(lines, 'test_types', line)}: test_types {test_types} should be a non-empty subset of {list(TEST_TYPES)}."
        )
    duplicates: list[dict[str, str]] = []
    categories = {}
    for key in ("targ1", "targ2"):
        categories[key] = _require(record[key], "category", str, path, _line_of(lines, key, line), key)
    sets = {}
    for key in SET_KEYS:
        at = _line_of(lines, key, line)
        captions = _require(record[key], "captions", dict, path, at, key)
        if not captions:
            raise InputError(
                f"{path}: line {at}: set {key} has no captions; a WEAT/SEAT test needs items in all four sets."
            )
        for index, caption in captions.items():
            if not isinstance(caption, str):
                raise InputError(
                    f"{path}: line {_line_of(lines, index, at)}: field {key}.captions[{index!r}] should be a caption "
                    f"string but is {caption!r:.80} ({type(caption).__name__})."
                )
        if key.startswith("targ"):
            image_keys = {"": "images"}
        else:
            image_keys = {categories[t]: f"{categories[t]}_Images" for t in ("targ1", "targ2")}
        images = {}
        for target, image_key in image_keys.items():
            mapping = _require(record[key], image_key, dict, path, at, key)
            images[target] = {}
            for image, indices in mapping.items():
                where = f"{key}.{image_key}[{image!r}]"
                if isinstance(indices, (str, int)) and not isinstance(indices, bool):
                    indices = [indices]  # coco/sent-weat6 writes one index as a bare string
                if not isinstance(indices, list) or not indices:
                    raise InputError(
                        f"{path}: line {_line_of(lines, image, at)}: {where} should be a non-empty list of caption indices."
                    )
                indices = [str(i) for i in indices]
                missing = [i for i in indices if i not in captions]
                if missing:
                    raise InputError(
                        f"{path}: line {_line_of(lines, image, at)}: {where} refers to caption(s) {missing} that "
                        f"{key}.captions does not have (it has {len(captions)}: {', '.join(list(captions)[:5])}...)."
                    )
                duplicates += [
                    {
                        "item": f"{name}/{where}: caption {i}",
                        "reason": "caption index repeated for the image; kept once",
                    }
                    for i in repeated(indices)
                ]
                images[target][image] = list(dict.fromkeys(indices))
            if not images[target]:
                raise InputError(
                    f"{path}: line {at}: {key}.{image_key} lists no images; a grounded test needs images in every set."
                )
        category = categories.get(key) or _require(record[key], "category", str, path, at, key)
        sets[key] = GroundedSet(key, category, {str(k): v for k, v in captions.items()}, images)
    return GroundedTest(
        name,
        path,
        line,
        list(dict.fromkeys(test_types)),
        **sets,
        contextual_words=contextual,
        dataset_dir=_optional_string(record, "dataset_dir", path, _line_of(lines, "dataset_dir", line)),
        duplicates=duplicates,
    )

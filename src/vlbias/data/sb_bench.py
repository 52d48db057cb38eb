"""Reader of SB-Bench (Narnaware et al., "SB-Bench: Stereotype Bias Benchmark for Large Multimodal Models", 2025) in
its Hugging Face layout, as :class:`~vlbias.data.bias_qa.BiasQAItem` questions for the ``bias_qa`` suite.

**Source read**: the dataset card / README of github.com/UCF-CRCV/SB-Bench (``README.md``, "Data Fields") and the
loader ``Evaluation/run_inference_batch.py`` there (``load_hf_dataset``: the ``datasets`` ``Features`` of
``ucf-crcv/SB-Bench``, split ``real``). **Where**: the Hugging Face dataset ``ucf-crcv/SB-Bench`` (gated; CC BY-NC 4.0).

Layout of ``ROOT`` (the dataset repository as the Hub holds it)::

    ROOT/data/<split>-00000-of-0000N.parquet   (the shards may also sit in ROOT itself, or be given one by one)

Each shard has the columns (:data:`COLUMNS`): ``file_name`` (Hugging Face's image feature: a struct of the encoded
``bytes`` and a ``path``), ``id`` (``<category>_<question>_<example>_<polarity>_<image>``), ``category`` (one of the
nine names of :data:`CATEGORIES`, or its index as a ``ClassLabel``), ``additional_metadata`` (a Python dict written
as text: ``{'subcategory': ..., 'stereotyped_groups': [...], 'version': ..., 'source': ...}``),
``question_polarity`` (``neg`` / ``nonneg``, or 0 / 1), ``context``, ``question``, ``ans0``, ``ans1``, ``ans2``
and ``label`` (the right option's index, 0-2).

Mapping: options ``[ans0, ans1, ans2]``; the unknown answer is the option worded as BBQ's
(:func:`~vlbias.data.bbq_answers.unknown_option`); the context is ambiguous when ``label`` is that option, else
disambiguated; the biased and counter answers follow from ``stereotyped_groups`` and the polarity
(:func:`~vlbias.data.bbq_answers.answer_kinds`); the category is the data set's name. The image bytes are held as an
:class:`~vlbias.data.images.EncodedImage` named by shard and row.

Refused with one :class:`~vlbias.errors.InputError` naming the shard, the row (0-based, as ``datasets`` counts) and
the column: a missing column, an unknown category, a ``label`` outside 0-2, an unknown polarity, unreadable
``additional_metadata``, an empty text field or a repeated ``id``. Skipped with the reason (by ``id``): a row without
image bytes or whose image does not decode, options without BBQ's unknown answer, and a question whose biased answer
cannot be told.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vlbias.data.bbq_answers import answer_kinds, unknown_option
from vlbias.data.bias_qa import BiasQAItem
from vlbias.data.images import EncodedImage, image_problem
from vlbias.errors import InputError

WHAT = "SB-Bench shard"
#: The nine categories, in the order of the loader's ``ClassLabel`` (its spelling kept: ``Race_etnicity``).
CATEGORIES = (
    "Age", "Disability_status", "Gender_identity", "Nationality", "Physical_appearance", "Race_etnicity", "Religion",
    "SES", "Sexual_orientation",
)  # fmt: skip
POLARITIES = ("neg", "nonneg")  # the ClassLabel's order
IMAGE_COLUMN = "file_name"
TEXT_COLUMNS = ("id", "context", "question", "ans0", "ans1", "ans2")
COLUMNS = (IMAGE_COLUMN, *TEXT_COLUMNS, "category", "additional_metadata", "question_polarity", "label")


def sb_bench_shards(path: str | Path) -> list[Path]:
    """The SB-Bench shards at ``path``: the file itself, or the ``*.parquet`` files of ``path/data/`` (else ``path``)
    whose columns are SB-Bench's; ``[]`` when there is none. Reads the files' schemas only."""
    path = Path(path)
    if path.is_file():
        candidates = [path]
    else:
        folder = path / "data" if (path / "data").is_dir() else path
        candidates = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    return [candidate for candidate in candidates if _has_columns(candidate)]


def read_sb_bench(path: str | Path) -> tuple[list[BiasQAItem], list[dict[str, str]]]:
    """The questions of every SB-Bench shard at ``path`` (module docstring), in shard and row order, and those
    skipped as ``{"item": id, "reason": ...}``."""
    path = Path(path)
    shards = sb_bench_shards(path)
    if not shards:
        raise InputError(
            f"SB-Bench path {str(path)!r} holds no shard; expected data/<split>-00000-of-0000N.parquet with the "
            f"columns {', '.join(COLUMNS)} (the Hugging Face dataset ucf-crcv/SB-Bench)."
        )
    items: list[BiasQAItem] = []
    skipped: list[dict[str, str]] = []
    seen: dict[str, str] = {}
    for shard in shards:
        table = _read(shard)
        for row, record in enumerate(table.to_pylist()):
            where = f"{WHAT} {str(shard)!r}: row {row}"
            item, reason = _item(shard, row, record, where)
            if item.id in seen:
                raise InputError(
                    f"{where}, column `id`: {item.id!r} is the id of {seen[item.id]} too; ids must be unique"
                )
            seen[item.id] = f"row {row} of {shard.name}"
            if reason is None and isinstance(item.image, EncodedImage):
                problem = image_problem(item.image)
                reason = None if problem is None else f"image of {shard.name} row {row}: {problem}"
            if reason is not None:
                skipped.append({"item": item.id, "reason": reason})
                continue
            items.append(item)
    return items, skipped


def _has_columns(path: Path) -> bool:
    try:
        names = pq.read_schema(path).names
    except (pa.ArrowException, OSError):
        return False
    return all(name in names for name in (IMAGE_COLUMN, "ans0", "ans2", "additional_metadata", "label"))


def _read(shard: Path) -> pa.Table:
    """The columns of :data:`COLUMNS` of ``shard``; :class:`InputError` naming it when one lacks or it cannot be read."""
    try:
        names = pq.read_schema(shard).names
        missing = [name for name in COLUMNS if name not in names]
        if missing:
            raise InputError(f"{WHAT} {str(shard)!r} lacks column(s) {missing}; expected {', '.join(COLUMNS)}.")
        return pq.read_table(shard, columns=list(COLUMNS))
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"{WHAT} {str(shard)!r} is not a Parquet file that can be read: {err}") from None


def _item(shard: Path, row: int, record: dict, where: str) -> tuple[BiasQAItem, str | None]:
    """The question of one row and why it is skipped (``None`` when it is not); :class:`InputError` for a broken row."""

    def bad(column: str, message: str) -> InputError:
        return InputError(f"{where}, column `{column}`: {message}")

    for column in TEXT_COLUMNS:
        if not isinstance(record[column], str) or (column != "context" and not record[column].strip()):
            raise bad(column, f"expected a non-empty string but got {record[column]!r}")
    category = record["category"]
    if isinstance(category, int) and not isinstance(category, bool) and 0 <= category < len(CATEGORIES):
        category = CATEGORIES[category]
    if category not in CATEGORIES:
        raise bad("category", f"expected one of {', '.join(CATEGORIES)} (or its index) but got {category!r}")
    polarity = record["question_polarity"]
    if isinstance(polarity, int) and not isinstance(polarity, bool) and 0 <= polarity < len(POLARITIES):
        polarity = POLARITIES[polarity]
    if polarity not in POLARITIES:
        raise bad("question_polarity", f"expected one of {', '.join(POLARITIES)} (or 0, 1) but got {polarity!r}")
    options = [record["ans0"], record["ans1"], record["ans2"]]
    label = record["label"]
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(options):
        raise bad("label", f"expected an option index in [0, {len(options)}) but got {label!r}")
    groups = _stereotyped_groups(record["additional_metadata"], bad)
    cell = record[IMAGE_COLUMN]
    data = cell.get("bytes") if isinstance(cell, dict) else None
    image = EncodedImage(data, f"{WHAT} {str(shard)!r}, row {row}") if isinstance(data, bytes) and data else None
    unknown = unknown_option(options)
    kinds, reason = (None, None) if unknown is None else answer_kinds(options, unknown, groups, polarity == "neg")
    if image is None:
        reason = f"row {row} of {shard.name} holds no image bytes"
    elif unknown is None:
        reason = f"no option is BBQ's unknown answer (exactly one expected): {options}"
    item = BiasQAItem(
        id=record["id"], image=image, context=record["context"], question=record["question"], options=tuple(options),
        kinds=kinds or (), answer=label, ambiguous=label == unknown, category=category, line=row,
    )  # fmt: skip
    return item, reason


def _stereotyped_groups(text: object, bad) -> list[str]:
    """``stereotyped_groups`` of the ``additional_metadata`` text (a Python dict as text; JSON read too)."""
    metadata = None
    if isinstance(text, str):
        for parse in (ast.literal_eval, json.loads):
            try:
                metadata = parse(text)
                break
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
    groups = metadata.get("stereotyped_groups") if isinstance(metadata, dict) else None
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise bad(
            "additional_metadata", f"expected a dict with a list of strings `stereotyped_groups` but got {text!r}"
        )
    return groups

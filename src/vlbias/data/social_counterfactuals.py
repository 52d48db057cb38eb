"""Reader for SocialCounterfactuals (Howard et al., "SocialCounterfactuals: Probing and Mitigating Intersectional
Social Biases in Vision-Language Models with Counterfactual Examples", CVPR 2024): 170,832 generated images in
counterfactual sets, each set showing one scene ("A picture of a ... plumber") with only two social attributes
changed (race, gender or physical characteristics), with the caption each image was generated from.

**Licence**: MIT (the dataset card). **Where**: the Hugging Face dataset ``Intel/SocialCounterfactuals`` (code:
github.com/IntelLabs/multimodal_cognitive_ai, ``SocialCounterfactuals/``); ``git clone`` it or download it with
``huggingface-cli download Intel/SocialCounterfactuals --repo-type dataset --local-dir ROOT``.

Layout of ``ROOT`` (the dataset repository as the Hub holds it; 61 shards, one split, ``train``)::

    ROOT/data/train-00000-of-00061-<hash>.parquet   (the shards may also sit in ROOT itself)

Each shard has the columns of the card's ``dataset_info`` (:data:`COLUMNS`): ``image`` (Hugging Face's image
feature: a struct of the encoded ``bytes`` and a ``path``), ``dataset_segment``, ``counterfactual_set`` (the set's
id), ``a1_type`` and ``a2_type`` (the two attribute types the set varies), ``a1`` and ``a2`` (this image's values of
them), ``a1a2`` (the pair, which names the image within its set) and ``caption``. The card lists no attribute values,
so values are kept as written and not checked against a list.

Only the text columns are read (:func:`read_social_counterfactuals`); the image bytes stay in the shards, and
:func:`read_encoded_image` reads one image's encoded bytes when it is needed, as an
:class:`~vlbias.data.images.EncodedImage` that :func:`vlbias.data.images.load_image` and every adapter's
``prepare_images`` decode, naming the shard and row in any error. A row with an empty (or null) text field, or repeating the ``(counterfactual_set,
a1a2)`` of an earlier row, is skipped naming the shard and row (0-based, as ``datasets`` counts). A folder without
shards, a file that is not Parquet or a shard lacking a column raises :class:`~vlbias.errors.InputError`. Fewer shards
than their names count (``of-00061``), or another number of rows than the release, is a warning naming both counts.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vlbias.data.face_gallery import warn_count
from vlbias.data.images import EncodedImage
from vlbias.errors import InputError

IMAGE_COLUMN = "image"
#: The text columns, as the card's ``dataset_info`` lists them (after ``image``).
TEXT_COLUMNS: tuple[str, ...] = (
    "dataset_segment", "a1_type", "a2_type", "counterfactual_set", "caption", "a1", "a2", "a1a2",
)  # fmt: skip
COLUMNS: tuple[str, ...] = (IMAGE_COLUMN, *TEXT_COLUMNS)
RELEASE_ROWS = 170_832
SHARD = re.compile(r"^train-(?P<index>\d{5})-of-(?P<total>\d{5})(?:-[0-9a-f]+)?\.parquet$")


@dataclass(frozen=True)
class CounterfactualImage:
    """One image of a counterfactual set: where its bytes are (``shard``, 0-based ``row``) and its text fields."""

    shard: Path
    row: int
    counterfactual_set: str
    dataset_segment: str
    a1_type: str
    a1: str
    a2_type: str
    a2: str
    a1a2: str
    caption: str

    @property
    def attributes(self) -> dict[str, str]:
        """``{a1_type: a1, a2_type: a2}``: this image's values of the two attributes its set varies."""
        return {self.a1_type: self.a1, self.a2_type: self.a2}


@dataclass(frozen=True)
class SocialCounterfactuals:
    """The images of a SocialCounterfactuals folder, in shard and row order, and the rows skipped
    (``{"item": "<shard> row N", "reason": ...}``)."""

    root: Path
    images: tuple[CounterfactualImage, ...]
    skipped: tuple[Mapping[str, str], ...] = ()

    def __len__(self) -> int:
        return len(self.images)

    def sets(self) -> dict[str, list[int]]:
        """Counterfactual set id -> the indices of its images in :attr:`images`, in order of first appearance."""
        found: dict[str, list[int]] = {}
        for index, image in enumerate(self.images):
            found.setdefault(image.counterfactual_set, []).append(index)
        return found


def read_social_counterfactuals(root: str | Path) -> SocialCounterfactuals:
    """The text columns of every shard under ``root`` (module docstring); no image is read."""
    root = Path(root)
    shards = find_shards(root)
    images: list[CounterfactualImage] = []
    skipped: list[dict[str, str]] = []
    first: dict[tuple[str, str], str] = {}
    for shard in shards:
        table = _text_columns(shard)
        columns = {name: table.column(name).to_pylist() for name in TEXT_COLUMNS}
        for row, values in enumerate(zip(*columns.values())):
            fields = dict(zip(TEXT_COLUMNS, values))
            item = f"{shard.name} row {row}"
            problem = _fields_problem(fields)
            if problem:
                skipped.append({"item": item, "reason": problem})
                continue
            key = (fields["counterfactual_set"], fields["a1a2"])
            if key in first:
                reason = f"counterfactual_set {key[0]!r}, a1a2 {key[1]!r} listed twice: {item} repeats {first[key]}"
                skipped.append({"item": item, "reason": reason})
                continue
            first[key] = item
            images.append(CounterfactualImage(shard, row, **{name: value.strip() for name, value in fields.items()}))
    warn_count(f"SocialCounterfactuals folder {str(root)!r}", len(images) + len(skipped), RELEASE_ROWS)
    return SocialCounterfactuals(root, tuple(images), tuple(skipped))


def find_shards(root: Path) -> list[Path]:
    """The release's shards in ``root/data/`` (or ``root``), sorted; a warning when some of the total their names
    count are absent, :class:`InputError` when there is none."""
    folder = root / "data" if (root / "data").is_dir() else root
    shards = sorted(path for path in folder.glob("*.parquet") if SHARD.match(path.name)) if folder.is_dir() else []
    if not shards:
        raise InputError(
            f"SocialCounterfactuals folder {str(root)!r} holds no shard; expected data/train-00000-of-00061-<hash>.parquet "
            "... (the Hugging Face dataset Intel/SocialCounterfactuals)."
        )
    total = int(SHARD.match(shards[0].name)["total"])
    if len(shards) != total:
        warnings.warn(
            f"SocialCounterfactuals folder {str(folder)!r} holds {len(shards)} shards; their names count {total}",
            stacklevel=3,
        )
    return shards


def read_encoded_image(image: CounterfactualImage) -> EncodedImage:
    """The encoded bytes of ``image`` (a PNG or JPEG file's content), read from its shard, named by shard and row;
    :class:`InputError` naming the shard and row when the row holds none."""
    handle = _open(image.shard)
    start = 0
    for group in range(handle.metadata.num_row_groups):
        rows = handle.metadata.row_group(group).num_rows
        if image.row < start + rows:
            cell = handle.read_row_group(group, columns=[IMAGE_COLUMN]).column(IMAGE_COLUMN)[image.row - start]
            data = cell.as_py()
            if isinstance(data, dict) and isinstance(data.get("bytes"), bytes) and data["bytes"]:
                return EncodedImage(data["bytes"], f"SocialCounterfactuals shard {str(image.shard)!r}, row {image.row}")
            raise InputError(
                f"SocialCounterfactuals shard {str(image.shard)!r}, row {image.row}: holds no image bytes."
            )
        start += rows
    raise InputError(f"SocialCounterfactuals shard {str(image.shard)!r} has {start} rows; row {image.row} is not one.")


def _fields_problem(fields: dict[str, object]) -> str:
    """Why a row's text fields cannot be used ("" when they can): empty (or null), or not text."""
    empty = [name for name, value in fields.items() if value is None or (isinstance(value, str) and not value.strip())]
    if empty:
        return f"empty field(s): {', '.join(empty)}"
    other = [f"{name} {value!r}" for name, value in fields.items() if not isinstance(value, str)]
    return f"field(s) not text: {', '.join(other)}" if other else ""


def _open(shard: Path) -> pq.ParquetFile:
    """The Parquet file ``shard``, after checking it has :data:`COLUMNS`; :class:`InputError` naming it otherwise."""
    try:
        handle = pq.ParquetFile(shard)
    except (pa.ArrowException, OSError) as err:
        raise InputError(
            f"SocialCounterfactuals shard {str(shard)!r} is not a Parquet file that can be read: {err}"
        ) from None
    names = handle.schema_arrow.names
    missing = [name for name in COLUMNS if name not in names]
    if missing:
        raise InputError(
            f"SocialCounterfactuals shard {str(shard)!r} lacks column(s) {missing}; it has {names}, "
            f"expected {', '.join(COLUMNS)}."
        )
    return handle


def _text_columns(shard: Path) -> pa.Table:
    """The text columns of ``shard`` (its image bytes are not read)."""
    handle = _open(shard)
    try:
        return handle.read(columns=list(TEXT_COLUMNS))
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"SocialCounterfactuals shard {str(shard)!r} could not be read: {err}") from None

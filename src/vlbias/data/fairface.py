"""Reader for FairFace (Kärkkäinen & Joo, "FairFace: Face Attribute Dataset for Balanced Race, Gender, and Age for
Bias Measurement and Mitigation", WACV 2021): 108,501 face images labelled with age group, gender and race, balanced
over seven race groups.

**Licence**: CC BY 4.0 (the release's README). **Where**: github.com/joojs/fairface links the image archives
(``fairface-img-margin025-trainval.zip``, ``fairface-img-margin125-trainval.zip``) and the label files
(``fairface_label_train.csv``, ``fairface_label_val.csv``). The two archives hold the same faces cropped with a
padding of 0.25 or 1.25 of the face box (:data:`PADDING_FOLDERS`); the labels are the same for both.

Layout of a data directory ``ROOT`` (the archives unpacked as they are)::

    ROOT/fairface_label_train.csv                         file,age,gender,race,service_test
    ROOT/fairface_label_val.csv                           e.g. val/1.jpg,3-9,Male,East Asian,False
    ROOT/fairface-img-margin025-trainval/{train,val}/*.jpg  padding 0.25
    ROOT/fairface-img-margin125-trainval/{train,val}/*.jpg  padding 1.25 (either folder, or both)

``ROOT`` may also be one of the two image folders itself, with the label files inside it or beside it, or a folder
holding ``train/``, ``val/`` and the label files (padding then as given, else unknown). With both image folders
present, ``padding`` chooses; with one, it is read.

Labels are kept as the release writes them (:data:`AGES`, :data:`GENDERS`, :data:`RACES`: the age groups are
strings such as ``"3-9"`` and ``"more than 70"``); ``service_test`` (``True``/``False``) marks the release's
balanced subset. A row with a value outside these, a ``file`` that is not ``<split>/<name>`` with an image suffix,
too few fields, an image listed twice or an image file that is missing is skipped with the file and row
(:mod:`vlbias.data.face_gallery`). A missing label file or a header without the five columns raises
:class:`~vlbias.errors.InputError`; a label file with another number of rows than the release
(:data:`RELEASE_ROWS`: 86,744 train, 10,954 val) is read with a warning naming both counts.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "val").mkdir(); _ = (root / "val" / "1.jpg").write_bytes(b"")
    >>> _ = (root / "fairface_label_val.csv").write_text(
    ...     "file,age,gender,race,service_test\\nval/1.jpg,more than 70,Female,Latino_Hispanic,True\\n")
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # 1 row where the release lists 10,954
    ...     gallery = read_fairface(root, "val")
    >>> gallery.images, {a: gallery.labels[a][0] for a in ("age", "race", "service_test")}
    (('val/1.jpg',), {'age': 'more than 70', 'race': 'Latino_Hispanic', 'service_test': True})
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from vlbias.data.face_gallery import FaceGallery, GalleryBuilder, warn_count
from vlbias.data.images import IMAGE_SUFFIXES
from vlbias.data.text_files import read_csv
from vlbias.errors import ConfigError, InputError

SPLITS: tuple[str, ...] = ("train", "val")
COLUMNS: tuple[str, ...] = ("file", "age", "gender", "race", "service_test")
AGES: tuple[str, ...] = ("0-2", "3-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "more than 70")
GENDERS: tuple[str, ...] = ("Male", "Female")
RACES: tuple[str, ...] = (
    "White", "Black", "Latino_Hispanic", "East Asian", "Southeast Asian", "Indian", "Middle Eastern",
)  # fmt: skip
VALUES: dict[str, tuple] = {"age": AGES, "gender": GENDERS, "race": RACES, "service_test": (False, True)}
#: padding -> the release's image folder of that padding.
PADDING_FOLDERS: dict[float, str] = {0.25: "fairface-img-margin025-trainval", 1.25: "fairface-img-margin125-trainval"}
#: Rows of each label file in the release (its manifest).
RELEASE_ROWS: dict[str, int] = {"train": 86_744, "val": 10_954}
_FLAGS = {"True": True, "False": False}


def label_file(split: str) -> str:
    """The release's label file of ``split``: ``fairface_label_<split>.csv``."""
    return f"fairface_label_{split}.csv"


def read_fairface(root: str | Path, split: str = "val", padding: float | None = None) -> FaceGallery:
    """One split of the FairFace directory ``root`` (layout in the module docstring).

    Args:
        root: the data directory, or one of the release's image folders.
        split: ``"train"`` or ``"val"``.
        padding: ``0.25`` or ``1.25``: which image folder to read when ``root`` holds both; ``None`` reads the one
            there is.
    """
    if split not in SPLITS:
        raise ConfigError(f"Expected `split` to be one of {', '.join(SPLITS)} but got {split!r}.")
    if padding is not None and padding not in PADDING_FOLDERS:
        raise ConfigError(
            f"Expected `padding` to be one of {', '.join(map(str, PADDING_FOLDERS))} but got {padding!r}."
        )
    root = Path(root)
    image_root, padding = _image_root(root, padding)
    labels = _label_path(root, image_root, split)
    if not (image_root / split).is_dir():
        raise InputError(
            f"FairFace image folder {str(image_root / split)!r} does not exist; expected the release's {split}/ "
            f"folder there (from {' or '.join(PADDING_FOLDERS.values())})."
        )
    records = read_csv(labels, "FairFace label file")
    header = [name.strip() for name in records[0].cells] if records else []
    missing = [column for column in COLUMNS if column not in header]
    if missing:
        raise InputError(
            f"FairFace label file {str(labels)!r}: header {header} lacks {missing}; expected {','.join(COLUMNS)}."
        )
    where = {column: header.index(column) for column in COLUMNS}
    warn_count(f"FairFace label file {str(labels)!r}", len(records) - 1, RELEASE_ROWS[split])
    builder = GalleryBuilder(VALUES)
    for record in records[1:]:
        item = f"{labels.name} row {record.line}"
        if len(record.cells) < len(header):
            builder.skip(item, f"expected {len(header)} fields ({','.join(header)}) but got {len(record.cells)}")
            continue
        cells = {column: record.cells[index].strip() for column, index in where.items()}
        image = cells["file"]
        problem = _file_problem(image, split)
        if problem:
            builder.skip(item, problem)
            continue
        row = {column: cells[column] for column in ("age", "gender", "race")}
        row["service_test"] = _FLAGS.get(cells["service_test"], cells["service_test"])
        builder.add(item, image, row, (image_root / image).is_file())
    return builder.gallery("FairFace", split, image_root, f"padding {padding}" if padding else "")


def _image_root(root: Path, padding: float | None) -> tuple[Path, float | None]:
    """The folder holding ``train/`` and ``val/``, and its padding (``None``: not known)."""
    named = {folder: value for value, folder in PADDING_FOLDERS.items()}
    if root.name in named:
        if padding is not None and padding != named[root.name]:
            raise ConfigError(
                f"`padding` is {padding} but FairFace folder {str(root)!r} holds padding {named[root.name]}."
            )
        return root, named[root.name]
    present = [value for value, folder in PADDING_FOLDERS.items() if (root / folder).is_dir()]
    if padding is None and len(present) > 1:
        raise ConfigError(
            f"FairFace directory {str(root)!r} holds both image folders ({', '.join(PADDING_FOLDERS.values())}); "
            f"choose one with `padding` ({' or '.join(map(str, present))})."
        )
    chosen = padding if padding is not None else (present[0] if present else None)
    if chosen in present:
        return root / PADDING_FOLDERS[chosen], chosen
    if present:
        raise InputError(
            f"FairFace directory {str(root)!r} has no {PADDING_FOLDERS[chosen]}/ for padding {chosen}; "
            f"it holds {', '.join(PADDING_FOLDERS[value] for value in present)}."
        )
    return root, chosen


def _label_path(root: Path, image_root: Path, split: str) -> Path:
    """``fairface_label_<split>.csv`` in ``root``, else beside the image folder ``root`` is."""
    name = label_file(split)
    for folder in dict.fromkeys((root, image_root, image_root.parent)):
        if (folder / name).is_file():
            return folder / name
    raise InputError(
        f"FairFace label file {str(root / name)!r} does not exist; expected {name} (header {','.join(COLUMNS)}) in "
        f"{str(root)!r}{' or beside it' if root == image_root else ''}."
    )


def _file_problem(image: str, split: str) -> str:
    """Why the ``file`` cell ``image`` is not ``<split>/<name>`` with an image suffix ("" when it is)."""
    path = PurePosixPath(image)
    if len(path.parts) != 2 or path.parts[0] != split or path.name in ("", ".", "..") or "\\" in image:
        return f"file {image!r} is not {split}/<name> (expected e.g. {split}/1.jpg)"
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        return f"file {image!r} has no image suffix ({', '.join(sorted(IMAGE_SUFFIXES))})"
    return ""

"""Which face-attribute data set a folder holds, and its reader: FairFace (a ``fairface_label_<split>.csv`` in the
folder or beside it, :mod:`vlbias.data.fairface`), CelebA (``list_attr_celeba.txt`` in the folder or in its
``Anno/``, :mod:`vlbias.data.celeba`), UTKFace (images named ``[age]_[gender]_[race]_[date&time].jpg`` in the folder
or in its ``UTKFace/``, :mod:`vlbias.data.utkface`), checked in that order.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "26_1_3_20170119180435537.jpg.chip.jpg").write_bytes(b"")
    >>> detect_face_dataset(root), detect_face_dataset(root / "elsewhere")
    ('UTKFace', None)
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from vlbias.data import celeba, fairface, utkface
from vlbias.data.face_gallery import FaceGallery
from vlbias.data.images import IMAGE_SUFFIXES
from vlbias.errors import ConfigError, InputError

#: data set -> the split read when none is given (UTKFace has one, ``"all"``).
DEFAULT_SPLITS: dict[str, str | None] = {"FairFace": "val", "CelebA": "test", "UTKFace": None}
EXPECTED = (
    "a FairFace fairface_label_<split>.csv, a CelebA list_attr_celeba.txt (or Anno/list_attr_celeba.txt), or UTKFace "
    f"images named {utkface.FORM}.jpg"
)


def detect_face_dataset(path: str | Path) -> str | None:
    """``"FairFace"``, ``"CelebA"`` or ``"UTKFace"`` by the files ``path`` holds (module docstring); ``None`` when it
    holds none of them."""
    path = Path(path)
    if not path.is_dir():
        return None
    labels = [fairface.label_file(split) for split in fairface.SPLITS]
    if any((folder / name).is_file() for folder in (path, path.parent) for name in labels):
        return "FairFace"
    if any((folder / celeba.ATTRIBUTES_FILE).is_file() for folder in (path, path / "Anno")):
        return "CelebA"
    folder = path / utkface.FOLDER if (path / utkface.FOLDER).is_dir() else path
    images = (p.name for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith("."))
    if any(not utkface.parse_name(name)[1] for name in islice(images, 1000)):
        return "UTKFace"
    return None


def read_face_dataset(path: str | Path, split: str | None = None) -> FaceGallery:
    """The gallery of the face-attribute data set ``path`` holds, ``split`` (default :data:`DEFAULT_SPLITS`); a folder
    holding none is refused naming what was looked for, and a split UTKFace does not have is refused."""
    dataset = detect_face_dataset(path)
    if dataset is None:
        raise InputError(f"Data path {str(path)!r} holds no face-attribute data set; expected {EXPECTED}.")
    split = split or DEFAULT_SPLITS[dataset]
    if dataset == "FairFace":
        return fairface.read_fairface(path, split)
    if dataset == "CelebA":
        return celeba.read_celeba(path, split)
    if split is not None:
        raise ConfigError(f"UTKFace has no splits (its gallery is every image) but `split` is {split!r}: remove it.")
    return utkface.read_utkface(path)

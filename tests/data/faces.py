"""Tiny image files and face-attribute data sets in their releases' exact layouts, for the reader and suite tests
(8 x 8 pixels; the readers only check that the images exist)."""

from collections.abc import Iterable
from pathlib import Path

from PIL import Image

from vlbias.data.celeba import ATTRIBUTES
from vlbias.data.fairface import PADDING_FOLDERS

FAIRFACE_HEADER = "file,age,gender,race,service_test\n"


def write_image(path: Path, colour: tuple[int, int, int] = (128, 128, 128)) -> Path:
    """An 8 x 8 JPEG (or PNG, by the suffix) of one ``colour`` at ``path``, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), colour).save(path, format="PNG" if path.suffix == ".png" else "JPEG")
    return path


def write_fairface(
    root: Path, rows: Iterable[str], images: Iterable[str], split: str = "val", folders: Iterable[float] = (0.25,)
) -> Path:
    """FairFace as the release unpacks: ``fairface_label_<split>.csv`` (its header, then ``rows``) in ``root``, and
    the ``images`` (names under ``<split>/``) in each padding folder of ``folders``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"fairface_label_{split}.csv").write_text(FAIRFACE_HEADER + "".join(rows))
    for padding in folders:
        for name in images:
            write_image(root / PADDING_FOLDERS[padding] / split / name)
    return root


def celeba_values(true: set[str]) -> str:
    """A row's 40 values as the release writes them: right-aligned in 2 characters, joined by a space."""
    return " ".join(f"{1 if name in true else -1:2d}" for name in ATTRIBUTES)


def celeba_row(name: str, true: set[str]) -> str:
    """A ``list_attr_celeba.txt`` row of image ``name`` with the attributes ``true`` set (1) and the others -1."""
    return f"{name} {celeba_values(true)}\n"


def write_celeba(
    root: Path, rows: list[str], partition: str, names: Iterable[str], count: int | None = None, folders: bool = False
) -> Path:
    """CelebA in ``root``: flat (as torchvision lays it out), or in the release's Anno/, Eval/, Img/ folders; the
    attribute file's first line is ``count`` (default the number of rows), the images ``names``."""
    anno, evaluation, img = (root / "Anno", root / "Eval", root / "Img") if folders else (root, root, root)
    for folder in (anno, evaluation):
        folder.mkdir(parents=True, exist_ok=True)
    header = f"{len(rows) if count is None else count}\n{' '.join(ATTRIBUTES)} \n"
    (anno / "list_attr_celeba.txt").write_text(header + "".join(rows))
    (evaluation / "list_eval_partition.txt").write_text(partition)
    for name in names:
        write_image(img / "img_align_celeba" / name)
    return root

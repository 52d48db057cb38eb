"""Reader for CelebA (Liu, Luo, Wang & Tang, "Deep Learning Face Attributes in the Wild", ICCV 2015): 202,599
celebrity face images, each with 40 binary attributes, split into train, val and test.

**Licence**: the CelebA release agreement: non-commercial research and educational purposes only; the images are
not the authors' property and may not be redistributed. **Where**: mmlab.ie.cuhk.edu.hk/projects/CelebA.html
(``Img/img_align_celeba.zip``, ``Anno/list_attr_celeba.txt``, ``Eval/list_eval_partition.txt``).

Layout of a data directory ``ROOT`` (each file in ``ROOT`` itself, as torchvision lays it out, or in the release's
``Anno/``, ``Eval/`` and ``Img/`` folders)::

    ROOT/list_attr_celeba.txt       202599                               first line: the number of rows
                                    5_o_Clock_Shadow Arched_Eyebrows ... second line: the 40 attribute names
                                    000001.jpg -1  1  1 -1 ...           then a row per image: -1 (no) or 1 (yes),
                                                                         runs of spaces between the values
    ROOT/list_eval_partition.txt    000001.jpg 0                         0 train, 1 val, 2 test
    ROOT/img_align_celeba/000001.jpg                                     the aligned and cropped images

Each attribute becomes a boolean column (-1 → ``False``, 1 → ``True``; :data:`ATTRIBUTES`, the release's names and
order), and ``gender`` is read from ``Male`` (``"Male"`` / ``"Female"``, as FairFace writes them). A row with a value
other than -1 or 1, another number of fields, an image not in the partition file (or listed there with a split other
than 0, 1, 2, or twice), an image listed twice or missing is skipped with its file and line
(:mod:`vlbias.data.face_gallery`); rows of the other splits are not read. A missing file or folder, a first line that
is not a count or a second line that is not the 40 names raises :class:`~vlbias.errors.InputError`. A file holding
another number of rows than its first line says, or than the release (:data:`RELEASE_IMAGES`), is read with a warning
naming both counts.
"""

from __future__ import annotations

import warnings
from pathlib import Path, PurePosixPath

from vlbias.data.face_gallery import FaceGallery, GalleryBuilder, warn_count
from vlbias.data.images import IMAGE_SUFFIXES
from vlbias.data.text_files import read_text
from vlbias.errors import ConfigError, InputError

ATTRIBUTES_FILE = "list_attr_celeba.txt"
PARTITION_FILE = "list_eval_partition.txt"
IMAGES = "img_align_celeba"
#: Where the release's download puts each part, relative to ``ROOT``, when it is not in ``ROOT`` itself.
RELEASE_FOLDERS = {ATTRIBUTES_FILE: "Anno", PARTITION_FILE: "Eval", IMAGES: "Img"}
SPLITS: tuple[str, ...] = ("train", "val", "test")  # codes 0, 1, 2 of the partition file
RELEASE_IMAGES = 202_599
#: The 40 attributes, in the release's order.
ATTRIBUTES: tuple[str, ...] = (
    "5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs", "Big_Lips", "Big_Nose",
    "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair", "Bushy_Eyebrows", "Chubby", "Double_Chin", "Eyeglasses",
    "Goatee", "Gray_Hair", "Heavy_Makeup", "High_Cheekbones", "Male", "Mouth_Slightly_Open", "Mustache",
    "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin", "Pointy_Nose", "Receding_Hairline", "Rosy_Cheeks",
    "Sideburns", "Smiling", "Straight_Hair", "Wavy_Hair", "Wearing_Earrings", "Wearing_Hat", "Wearing_Lipstick",
    "Wearing_Necklace", "Wearing_Necktie", "Young",
)  # fmt: skip
GENDERS: tuple[str, ...] = ("Male", "Female")
VALUES: dict[str, tuple] = {name: (False, True) for name in ATTRIBUTES} | {"gender": GENDERS}
_SIGNS = {"-1": False, "1": True}


def read_celeba(root: str | Path, split: str = "test") -> FaceGallery:
    """One split (``"train"``, ``"val"`` or ``"test"``) of the CelebA directory ``root`` (module docstring)."""
    if split not in SPLITS:
        raise ConfigError(f"Expected `split` to be one of {', '.join(SPLITS)} but got {split!r}.")
    root = Path(root)
    attributes_path, partition_path, image_root = (_part(root, name) for name in RELEASE_FOLDERS)
    if not image_root.is_dir():
        raise InputError(f"CelebA image folder {str(image_root)!r} does not exist; expected {IMAGES}/000001.jpg ...")
    builder = GalleryBuilder(VALUES)
    partition = _read_partition(partition_path, builder)
    lines = read_text(attributes_path, "CelebA attribute file").splitlines()
    columns = _header(attributes_path, lines)
    code = SPLITS.index(split)
    for number, line in enumerate(lines[2:], start=3):
        fields = line.split()
        if not fields:
            continue
        item, name = f"{attributes_path.name} line {number}", fields[0]
        if name not in partition:
            builder.skip(item, f"image {name!r} is not listed in {partition_path.name}")
            continue
        if partition[name] != code:
            continue
        problem = _row_problem(fields, columns)
        if problem:
            builder.skip(item, problem)
            continue
        labels = {column: _SIGNS[value] for column, value in zip(columns, fields[1:])}
        labels["gender"] = GENDERS[0] if labels["Male"] else GENDERS[1]
        builder.add(item, name, labels, (image_root / name).is_file())
    return builder.gallery("CelebA", split, image_root)


def _part(root: Path, name: str) -> Path:
    """``root/name``, else ``root/<release folder>/name`` where that exists; ``root/name`` when neither does."""
    for path in (root / name, root / RELEASE_FOLDERS[name] / name):
        if path.exists():
            return path
    if name != IMAGES:
        raise InputError(
            f"CelebA file {str(root / name)!r} does not exist (nor in {RELEASE_FOLDERS[name]}/); expected the "
            f"release's {name} there."
        )
    return root / name


def _header(path: Path, lines: list[str]) -> list[str]:
    """The attribute names of the file's second line, after checking its first line (the row count) against the
    rows it holds and the release's count; :class:`InputError` if either line is not what the release writes."""
    count = lines[0].strip() if lines else ""
    if not count.isdigit():
        shown = count if len(count) <= 40 else count[:40] + "..."
        raise InputError(f"CelebA attribute file {str(path)!r}: line 1 is {shown!r}; expected the number of rows.")
    columns = lines[1].split() if len(lines) > 1 else []
    if sorted(columns) != sorted(ATTRIBUTES):
        missing = [name for name in ATTRIBUTES if name not in columns]
        extra = [name for name in columns if name not in ATTRIBUTES]
        raise InputError(
            f"CelebA attribute file {str(path)!r}: line 2 should name the 40 attributes once each "
            f"({ATTRIBUTES[0]} ... {ATTRIBUTES[-1]}); missing {missing}, unexpected {extra}, {len(columns)} names."
        )
    rows = sum(1 for line in lines[2:] if line.strip())
    if rows != int(count):
        warnings.warn(
            f"CelebA attribute file {str(path)!r}: line 1 says {int(count):,} rows; it holds {rows:,}", stacklevel=3
        )
    warn_count(f"CelebA attribute file {str(path)!r}", rows, RELEASE_IMAGES)
    return columns


def _read_partition(path: Path, builder: GalleryBuilder) -> dict[str, int]:
    """Image name -> split code, from ``list_eval_partition.txt``; malformed lines are skipped into ``builder``."""
    partition: dict[str, int] = {}
    first: dict[str, int] = {}
    rows = 0
    for number, line in enumerate(read_text(path, "CelebA partition file").splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        rows += 1
        item = f"{path.name} line {number}"
        if len(fields) != 2 or fields[1] not in ("0", "1", "2"):
            builder.skip(item, f"expected '<image> 0|1|2' (0 train, 1 val, 2 test) but got {line.strip()!r}")
        elif fields[0] in first:
            builder.skip(item, f"image {fields[0]!r} listed twice: line {number} repeats line {first[fields[0]]}")
        else:
            first[fields[0]] = number
            partition[fields[0]] = int(fields[1])
    warn_count(f"CelebA partition file {str(path)!r}", rows, RELEASE_IMAGES)
    return partition


def _row_problem(fields: list[str], columns: list[str]) -> str:
    """Why an attribute row cannot be read ("" when it can)."""
    name = PurePosixPath(fields[0])
    if len(name.parts) != 1 or "\\" in fields[0] or name.suffix.lower() not in IMAGE_SUFFIXES:
        return f"image {fields[0]!r} is not a file name with an image suffix (expected e.g. 000001.jpg)"
    if len(fields) != len(columns) + 1:
        return f"expected an image name and {len(columns)} values but got {len(fields)} fields"
    bad = next((k for k, value in enumerate(fields[1:]) if value not in _SIGNS), None)
    if bad is not None:
        return f"{columns[bad]} {fields[bad + 1]!r} is not -1 or 1"
    return ""

"""Reader for UTKFace (Zhang, Song & Qi, "Age Progression/Regression by Conditional Adversarial Autoencoder",
CVPR 2017): over 20,000 face images, each labelled with age, gender and race in its file name.

**Licence**: non-commercial research purposes only (the release's page; the images' copyright stays with their
owners). **Where**: susanqq.github.io/UTKFace links the archives: ``UTKFace.tar.gz`` (aligned and cropped faces,
named ``....jpg.chip.jpg``), ``crop_part1.tar.gz``, and the in-the-wild images ``part1``–``part3`` (``....jpg``).

Layout: the images of one archive, unpacked, directly in ``ROOT`` (or in ``ROOT/UTKFace/``), each named::

    [age]_[gender]_[race]_[date&time].jpg            e.g. 26_1_3_20170119180435537.jpg
    [age]_[gender]_[race]_[date&time].jpg.chip.jpg   e.g. 1_0_2_20161219140623097.jpg.chip.jpg

``age`` is an integer from 0 to 116; ``gender`` 0 (male) or 1 (female), read as ``"Male"`` / ``"Female"``
(:data:`GENDERS`); ``race`` 0 to 4: White, Black, Asian, Indian, Others (:data:`RACES`); ``date&time`` the
``yyyymmddHHMMSSFFF`` the photo was added. There is no label file: a file name that does not follow this form is
skipped by name with the reason, never guessed: a few public names miss a field (``39_1_20170116174525125.jpg.chip.jpg``
has no race), some hold a code outside the documented ones. Files without an image suffix, hidden files and folders are
not part of the data set and are passed over. A folder that does not exist or holds no image is refused with
:class:`~vlbias.errors.InputError`. The release states no exact count, so no manifest is checked. The gallery has one
split, ``"all"``.

Example:
    >>> parse_name("26_1_3_20170119180435537.jpg.chip.jpg")
    ({'age': 26, 'gender': 'Female', 'race': 'Indian'}, '')
    >>> parse_name("39_1_20170116174525125.jpg.chip.jpg")[1]
    '3 fields where [age]_[gender]_[race]_[date&time] has 4 (a field is missing; it is not guessed)'
"""

from __future__ import annotations

import re
from pathlib import Path

from vlbias.data.face_gallery import FaceGallery, GalleryBuilder
from vlbias.data.images import IMAGE_SUFFIXES
from vlbias.errors import InputError

FOLDER = "UTKFace"
GENDERS: tuple[str, ...] = ("Male", "Female")  # codes 0, 1
RACES: tuple[str, ...] = ("White", "Black", "Asian", "Indian", "Others")  # codes 0 to 4
AGES: tuple[int, ...] = tuple(range(117))
VALUES: dict[str, tuple] = {"age": AGES, "gender": GENDERS, "race": RACES}
NAME = re.compile(r"^(?P<fields>[^.]*)\.jpg(?:\.chip\.jpg)?$")
FORM = "[age]_[gender]_[race]_[date&time]"


def parse_name(name: str) -> tuple[dict[str, object], str]:
    """``(labels, "")`` from a UTKFace file name, or ``({}, why it is not one)``."""
    match = NAME.match(name)
    if match is None:
        return {}, f"not named {FORM}.jpg or {FORM}.jpg.chip.jpg"
    fields = match["fields"].split("_")
    if len(fields) != 4:
        return {}, f"{len(fields)} fields where {FORM} has 4 (a field is missing; it is not guessed)"
    if not all(field.isascii() and field.isdigit() for field in fields):
        return {}, f"fields {fields} are not all whole numbers ({FORM})"
    age, gender, race = (int(field) for field in fields[:3])
    if age >= len(AGES):
        return {}, f"age {age} is outside 0-{len(AGES) - 1}"
    if gender >= len(GENDERS):
        return {}, f"gender code {gender} is not 0 (male) or 1 (female)"
    if race >= len(RACES):
        codes = ", ".join(f"{code} {name}" for code, name in enumerate(RACES))
        return {}, f"race code {race} is not one of {codes}"
    return {"age": age, "gender": GENDERS[gender], "race": RACES[race]}, ""


def read_utkface(root: str | Path) -> FaceGallery:
    """The images of the UTKFace folder ``root`` (or ``root/UTKFace``), labelled from their names."""
    root = Path(root)
    folder = root / FOLDER if (root / FOLDER).is_dir() else root
    if not folder.is_dir():
        raise InputError(f"UTKFace folder {str(root)!r} does not exist; expected the images named {FORM}.jpg in it.")
    files = sorted(
        path.name
        for path in folder.iterdir()
        if not path.name.startswith(".") and not path.is_dir() and path.suffix.lower() in IMAGE_SUFFIXES
    )
    if not files:
        raise InputError(f"UTKFace folder {str(folder)!r} holds no image; expected the images named {FORM}.jpg in it.")
    builder = GalleryBuilder(VALUES)
    for name in files:
        labels, problem = parse_name(name)
        if problem:
            builder.skip(name, f"file name {problem}")
        else:
            builder.add(name, name, labels, (folder / name).is_file())
    return builder.gallery("UTKFace", "all", folder)

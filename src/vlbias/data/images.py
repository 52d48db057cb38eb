"""Image loading shared by the data readers and the model adapters: one :func:`load_image`, one
list of image file suffixes (:data:`IMAGE_SUFFIXES`)."""

from __future__ import annotations

import warnings
from pathlib import Path

from PIL import Image

from vlbias.errors import InputError

ImageInput = Image.Image | str | Path
IMAGE_SUFFIXES: frozenset[str] = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})


def load_image(image: ImageInput) -> Image.Image:
    """Open ``image`` (a PIL image or a path) as RGB.

    A file that does not decode raises :class:`InputError` naming it; a non-RGB image
    (grey, palette, RGBA, CMYK) is converted with a warning that names the file and mode.
    """
    if isinstance(image, Image.Image):
        picture, name = image, "<in-memory image>"
    else:
        name = str(image)
        if not Path(image).is_file():
            raise InputError(f"Image file {name!r} does not exist.")
        try:
            picture = Image.open(image)
            picture.load()
        except Exception as err:  # PIL raises several unrelated types for corrupt files
            raise InputError(f"Image file {name!r} could not be decoded as an image: {err}") from err
    if picture.mode != "RGB":
        warnings.warn(f"Image {name!r} has mode {picture.mode!r}; converted to RGB.", stacklevel=2)
        picture = picture.convert("RGB")
    return picture

r"""The project's one image reader (:func:`load_image`), its check for data readers (:func:`image_problem`)
and the one list of image file suffixes (:data:`IMAGE_SUFFIXES`).

Every image becomes the 8-bit RGB picture a viewer would show, by these rules:

* EXIF orientation is applied first (:func:`PIL.ImageOps.exif_transpose`), so a photo stored sideways is
  read upright.
* ``1``, ``L``, ``P``, ``RGB``, ``RGBX``, ``CMYK`` and ``YCbCr``: PIL's conversion to RGB (``1`` → 0 or 255;
  ``CMYK`` as uncalibrated ink, :math:`(255 - c)(255 - k) / 255` per channel; ``YCbCr`` by the JFIF/BT.601
  formula in PIL's fixed point, within 1 of the exact one).
* Transparency (``LA``, ``La``, ``PA``, ``RGBA``, ``RGBa``, and a ``P``/``L``/``RGB`` image with a
  transparent colour): composited on white, :math:`c' = \alpha c + (1 - \alpha) \cdot 255` with
  :math:`\alpha` = alpha / 255, as the picture looks on a white page. (Dropping alpha instead would show
  whatever colour a fully transparent pixel happens to store.)
* More than 8 bits: ``I;16`` (``I;16L``, ``I;16B``, ``I;16N``) and ``I`` are 16-bit values, read as
  :math:`\operatorname{round}(v / 257)` (65535 → 255); ``F`` holds values in [0, 1], read as
  :math:`\operatorname{round}(255 v)`. Values outside those ranges (or NaN) are refused, not clipped: an
  ``I`` image with 32-bit values or an ``F`` image on a 0–255 scale would otherwise be read wrong silently.
* Any other mode (``HSV``, ``LAB``, ``I;16S``, ...) is refused by name.

A file is decoded in full (``Image.load`` with ``ImageFile.LOAD_TRUNCATED_IMAGES`` off), so a truncated
file fails here, when a reader checks it, and not halfway through a measurement. An image whose header declares
more pixels (width x height) than :func:`max_pixels` is refused before it is decoded: a small file can declare a
picture that needs gigabytes (a decompression bomb). The limit is :data:`DEFAULT_MAX_PIXELS` (PIL's own default,
about 9,459 x 9,459) unless the environment variable :data:`MAX_PIXELS_VARIABLE` (``VLBIAS_MAX_IMAGE_PIXELS``)
sets another: one setting for every command, data reader, dataloader worker and Slurm job. Every failure (missing
file, dangling link, no permission, an image over the pixel limit, truncated or undecodable data, unsupported mode,
values out of range) is an :class:`ImageProblem` (an :class:`~vlbias.errors.InputError`) naming the file; data
readers skip such a file with the reason (:func:`image_problem`).

Example:
    >>> import numpy as np
    >>> deep = Image.fromarray(np.array([[0, 257 * 127, 65535]], dtype=np.uint16))  # a 16-bit grey ramp
    >>> deep.mode, np.asarray(rgb_picture(deep))[0, :, 0].tolist()
    ('I;16', [0, 127, 255])
"""

from __future__ import annotations

import io
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from vlbias.errors import ConfigError, InputError


@dataclass(frozen=True)
class EncodedImage:
    """An image file's content held in memory (a PNG or JPEG as a Parquet shard stores it); ``source`` names where
    it came from in every error ("SocialCounterfactuals shard 'a.parquet', row 3")."""

    data: bytes
    source: str


ImageInput = Image.Image | str | Path | EncodedImage
IMAGE_SUFFIXES: frozenset[str] = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})

COLOUR_MODES = frozenset({"1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr"})
ALPHA_MODES = frozenset({"LA", "La", "PA", "RGBA", "RGBa"})
# mode -> (the value read as 255, the rule as the warning states it)
DEEP_MODES: dict[str, tuple[float, str]] = {
    "I;16": (65535.0, "16-bit values / 257"),
    "I;16L": (65535.0, "16-bit values / 257"),
    "I;16B": (65535.0, "16-bit values / 257"),
    "I;16N": (65535.0, "16-bit values / 257"),
    "I": (65535.0, "16-bit values / 257"),
    "F": (1.0, "values in [0, 1] x 255"),
}
SUPPORTED_MODES = sorted(COLOUR_MODES | ALPHA_MODES | set(DEEP_MODES))
IN_MEMORY = "Image '<in-memory image>'"
#: The environment variable that sets the largest image vlbias decodes, in pixels (width x height).
MAX_PIXELS_VARIABLE = "VLBIAS_MAX_IMAGE_PIXELS"
#: The pixel limit without :data:`MAX_PIXELS_VARIABLE`: PIL's own default (``Image.MAX_IMAGE_PIXELS``), about
#: 9,459 x 9,459, some 270 MB decoded as RGB; the public data sets' images are far smaller (COCO's 640 x 480).
DEFAULT_MAX_PIXELS = 89_478_485
_PIL_SETTINGS = threading.RLock()  # PIL's reading settings are module globals: one reader changes them at a time


class ImageProblem(InputError):
    """An image that cannot be read: the message names it, ``reason`` says why without naming it."""

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(f"{label} {reason}")
        self.reason = reason


def load_image(image: ImageInput) -> Image.Image:
    """``image`` (a PIL image, a path or an :class:`EncodedImage`) as an 8-bit RGB picture, by the rules of the module docstring.

    A path that is missing, a dangling link, unreadable or does not decode in full, an image that declares more
    pixels than :func:`max_pixels`, and an image of an unsupported mode or out-of-range values, raise
    :class:`ImageProblem` (an :class:`InputError`) naming it.
    A non-RGB image is converted with a warning naming it, its mode and the rule applied.
    """
    rgb, note = _read(image)
    if note is not None:
        warnings.warn(note, stacklevel=2)
    return rgb


def image_problem(path: str | Path | EncodedImage, shown: str | None = None) -> str | None:
    """Why the image file ``path`` (or an image's bytes held in memory) cannot be read by :func:`load_image`, or
    ``None`` when it can; the path in the reason written as ``shown`` when given (the name a data file gives it, the
    same on every machine and rank).

    Data readers call this on every file they list, so that a bad file is skipped with this reason
    before any model runs.
    """
    try:
        _read(path if isinstance(path, EncodedImage) else Path(path))
    except ImageProblem as err:
        return err.reason if shown is None else err.reason.replace(str(path), shown)
    return None


def max_pixels() -> int:
    """The largest image :func:`load_image` decodes, in pixels: :data:`MAX_PIXELS_VARIABLE` when it is set, else
    :data:`DEFAULT_MAX_PIXELS`. A value that is not a positive whole number is a :class:`~vlbias.errors.ConfigError`
    naming the variable.

    Example:
        >>> max_pixels() == int(os.environ.get(MAX_PIXELS_VARIABLE) or DEFAULT_MAX_PIXELS)
        True
    """
    given = os.environ.get(MAX_PIXELS_VARIABLE, "").strip()
    if not given:
        return DEFAULT_MAX_PIXELS
    if not given.isdigit() or int(given) < 1:
        raise ConfigError(
            f"Environment variable {MAX_PIXELS_VARIABLE} is {given!r}; expected a positive whole number of pixels "
            f"(width x height; default {DEFAULT_MAX_PIXELS})."
        )
    return int(given)


def _read(image: ImageInput) -> tuple[Image.Image, str | None]:
    """``image`` as 8-bit RGB, and the note on its conversion (``None`` for an RGB image)."""
    if isinstance(image, Image.Image):
        picture, label = _loaded(image, IN_MEMORY), IN_MEMORY  # a lazily opened image is decoded here
    elif isinstance(image, EncodedImage):
        label = f"Image from {image.source}"
        picture = _opened(io.BytesIO(image.data), label)
    else:
        picture, label = _decoded(Path(image)), f"Image file {str(image)!r}"
    try:
        picture = ImageOps.exif_transpose(picture)
    except Exception as err:  # noqa: BLE001 -- a corrupt EXIF block raises several unrelated types
        raise ImageProblem(label, f"has an EXIF block that could not be read: {err}") from err
    rgb = rgb_picture(picture, label)
    note = None if picture.mode == "RGB" else f"{label} has mode {picture.mode!r}; converted to RGB ({_rule(picture)})."
    return rgb, note


def rgb_picture(picture: Image.Image, label: str = IN_MEMORY) -> Image.Image:
    """``picture`` (decoded and upright) as 8-bit RGB; ``label`` names it in errors."""
    mode = picture.mode
    if mode in DEEP_MODES:
        return _scaled(picture, label)
    if mode in ALPHA_MODES or (mode in COLOUR_MODES and "transparency" in picture.info):
        rgba = np.asarray(picture.convert("RGBA"), dtype=np.float64)  # (H, W, 4)
        alpha = rgba[..., 3:] / 255.0
        return Image.fromarray(np.rint(rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8))
    if mode in COLOUR_MODES:
        return picture.convert("RGB")
    raise ImageProblem(label, f"has mode {mode!r}, which is not supported; supported modes: {SUPPORTED_MODES}")


def _scaled(picture: Image.Image, label: str) -> Image.Image:
    """An ``I``/``I;16``/``F`` image scaled to 8 bits by :data:`DEEP_MODES`, refused when out of range."""
    top, rule = DEEP_MODES[picture.mode]
    values = np.asarray(picture).astype(np.float64)  # (H, W)
    if values.size and not (np.isfinite(values).all() and values.min() >= 0 and values.max() <= top):
        finite = values[np.isfinite(values)]
        found = [f"values in [{finite.min():g}, {finite.max():g}]"] if finite.size else []
        found += ["NaN or infinite values"] if finite.size < values.size else []
        raise ImageProblem(
            label,
            f"has mode {picture.mode!r} with {' and '.join(found)}; expected values in [0, {top:g}] ({rule})",
        )
    grey = np.rint(values * (255.0 / top)).astype(np.uint8)
    return Image.fromarray(np.stack([grey] * 3, axis=-1))  # (H, W, 3)


def _rule(picture: Image.Image) -> str:
    if picture.mode in DEEP_MODES:
        return DEEP_MODES[picture.mode][1]
    if picture.mode in ALPHA_MODES or "transparency" in picture.info:
        return "transparency composited on white"
    return "PIL's conversion"


def _decoded(path: Path) -> Image.Image:
    """The image file at ``path``, decoded in full; :class:`ImageProblem` saying why it cannot be."""
    label = f"Image file {str(path)!r}"
    if path.is_symlink() and not path.exists():
        raise ImageProblem(label, f"is a dangling symbolic link: its target {str(path.readlink())!r} does not exist")
    if not path.exists():
        raise ImageProblem(label, "does not exist")
    if not path.is_file():
        raise ImageProblem(label, "is not a regular file")
    return _opened(path, label)


def _opened(source: Path | io.BytesIO, label: str) -> Image.Image:
    """The image file or encoded bytes ``source``, decoded in full; :class:`ImageProblem` saying why it cannot be."""
    try:
        with _pil_settings(), Image.open(source) as picture:  # the header only: the size is checked before decoding
            return _loaded(picture, label)
    except UnidentifiedImageError as err:
        raise ImageProblem(label, f"could not be decoded as an image: {err}") from err
    except OSError as err:  # opening the file failed: permission denied, ...
        raise ImageProblem(label, f"could not be read: {err.strerror or err}") from err


def _loaded(picture: Image.Image, label: str) -> Image.Image:
    """``picture`` decoded in full (a truncated file fails here), or :class:`ImageProblem`; one that declares more
    pixels than :func:`max_pixels` is refused before it is decoded."""
    width, height = picture.size
    limit = max_pixels()
    if width * height > limit:
        raise ImageProblem(
            label,
            f"declares {width} x {height} = {width * height:,} pixels, more than the limit of {limit:,} (a "
            f"decompression bomb, or a picture larger than any data set's); set {MAX_PIXELS_VARIABLE} to read it",
        )
    try:
        with _pil_settings():
            picture.load()
    except Exception as err:  # noqa: BLE001 -- PIL raises several unrelated types for corrupt files
        raise ImageProblem(label, f"could not be decoded as an image: {err}") from err
    return picture


@contextmanager
def _pil_settings() -> Iterator[None]:
    """For the block, under a lock: ``ImageFile.LOAD_TRUNCATED_IMAGES`` off (another library may have turned it
    on), and PIL's own decompression-bomb check (``Image.MAX_IMAGE_PIXELS``, a warning then an exception without
    the file's name) off: :func:`_loaded` applies the one limit, :func:`max_pixels`, and names the file."""
    with _PIL_SETTINGS:
        before = ImageFile.LOAD_TRUNCATED_IMAGES, Image.MAX_IMAGE_PIXELS
        ImageFile.LOAD_TRUNCATED_IMAGES, Image.MAX_IMAGE_PIXELS = False, None
        try:
            yield
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES, Image.MAX_IMAGE_PIXELS = before

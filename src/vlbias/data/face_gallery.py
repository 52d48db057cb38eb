"""What every face-attribute reader returns (:class:`FaceGallery`) and how it is built (:class:`GalleryBuilder`).

A gallery is a list of image files, each labelled with the same attributes (FairFace's ``age``, ``gender``,
``race``; UTKFace's ``age``, ``gender``, ``race``; CelebA's 40 binary attributes and ``gender``). Each attribute
has the values its data set documents (:attr:`FaceGallery.values`); a label outside them is never kept. Images are
not decoded here: a reader only checks that each file exists, and :func:`vlbias.data.images.load_image` reads it
later (with its decompression-bomb check).

What a reader cannot use is skipped, not fatal, and listed in :attr:`FaceGallery.skipped` as ``{"item", "reason"}``:
``item`` names the file and row (``fairface_label_val.csv row 3``) or the image file (UTKFace's names), ``reason``
the value at fault and what was expected. The rules every reader shares:

* a row naming an image already listed is skipped (the first listing wins);
* a row whose image file is missing is skipped, naming the file;
* a value outside an attribute's documented values is skipped, naming the attribute, the value and the values.

A label file that is missing or whose header is wrong raises :class:`~vlbias.errors.InputError` (one line naming
the file and what was expected). A release whose size is known (its manifest) is compared with what the file lists:
a difference is a warning naming both counts (:func:`warn_count`), since a user may hold a subset.

Example:
    >>> builder = GalleryBuilder({"gender": ("Male", "Female")})
    >>> builder.skip("labels.csv row 3", "no image")
    >>> builder.add("labels.csv row 2", "a.jpg", {"gender": "Female"}, image_exists=True)
    True
    >>> gallery = builder.gallery("example", "val", "/data")
    >>> len(gallery), gallery.groups("gender"), gallery.skipped[0]["item"]
    (1, {'Male': [], 'Female': [0]}, 'labels.csv row 3')
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vlbias.errors import ConfigError

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True)
class FaceGallery:
    """An attribute-labelled image gallery: one split of one face-attribute data set.

    Attributes:
        dataset: the data set's name (``"FairFace"``, ``"UTKFace"``, ``"CelebA"``).
        split: the split read (``"train"``, ``"val"``, ``"test"``; ``"all"`` for a data set without splits).
        image_root: the folder that :attr:`images` are relative to.
        images: the image files, relative to ``image_root`` (:attr:`image_paths`: joined), in the label file's order.
        labels: attribute -> one value per image, aligned with ``images`` (the attribute table, a column each).
        values: attribute -> the values its data set documents, in the documented order.
        variant: the release variant read, "" for a data set released in one form (FairFace's padding: ``"padding 0.25"``).
        skipped: what was left out, ``{"item": file and row (or file name), "reason": ...}`` each.
        pixels: the images themselves, uint8 ``(N, 3, H, W)``, for a gallery drawn in memory (BiasWorld's,
            :mod:`vlbias.data.biasworld_gallery`): ``images`` then only name them; ``None`` for files.
    """

    dataset: str
    split: str
    image_root: Path
    images: tuple[str, ...]
    labels: Mapping[str, tuple]
    values: Mapping[str, tuple]
    variant: str = ""
    skipped: tuple[Mapping[str, str], ...] = ()
    pixels: Tensor | None = None

    def __post_init__(self) -> None:
        if set(self.labels) != set(self.values):
            raise ValueError(f"labels name {sorted(self.labels)} but values name {sorted(self.values)}")
        lengths = {attribute: len(column) for attribute, column in self.labels.items() if len(column) != len(self)}
        if lengths:
            raise ValueError(f"{len(self)} images but attribute columns of lengths {lengths}")
        if self.pixels is not None and len(self.pixels) != len(self):
            raise ValueError(f"{len(self)} images but {len(self.pixels)} pixel arrays")

    def __len__(self) -> int:
        return len(self.images)

    @property
    def attributes(self) -> tuple[str, ...]:
        """The attributes, in the order the reader lists them."""
        return tuple(self.values)

    @property
    def image_paths(self) -> list[Path]:
        return [self.image_root / image for image in self.images]

    @property
    def model_inputs(self) -> Tensor | list[Path]:
        """What :meth:`~vlbias.models.base.ModelAdapter.prepare_images` takes, one per image: the pixels as float in
        [0, 1] for a gallery in memory, else the image files."""
        return self.image_paths if self.pixels is None else self.pixels.float() / 255.0

    def groups(self, attribute: str) -> dict[Hashable, list[int]]:
        """Documented value -> the indices of the images that hold it, for every documented value (an empty
        group is listed, with no index). An attribute not in the gallery is refused with the list."""
        if attribute not in self.values:
            raise ConfigError(
                f"Expected `attribute` to be one of {self.dataset}'s {', '.join(self.values)} but got {attribute!r}."
            )
        found: dict[Hashable, list[int]] = {value: [] for value in self.values[attribute]}
        for index, value in enumerate(self.labels[attribute]):
            found[value].append(index)
        return found


class GalleryBuilder:
    """Collects a reader's rows into a :class:`FaceGallery`, applying the shared rules (module docstring).

    Args:
        values: attribute -> its documented values; every row gives one value per attribute.
    """

    def __init__(self, values: Mapping[str, tuple]) -> None:
        self.values = dict(values)
        self._allowed = {attribute: frozenset(listed) for attribute, listed in self.values.items()}
        self.images: list[str] = []
        self.labels: dict[str, list] = {attribute: [] for attribute in self.values}
        self.skipped: list[dict[str, str]] = []
        self._first: dict[str, str] = {}  # image -> the item that listed it first

    def skip(self, item: str, reason: str) -> None:
        """Leave ``item`` out, with ``reason``."""
        self.skipped.append({"item": item, "reason": reason})

    def add(self, item: str, image: str, labels: Mapping[str, object], image_exists: bool) -> bool:
        """Keep ``image`` with ``labels`` unless a shared rule skips it (then ``False``, with the reason).

        ``item`` names the row (file and row); ``image_exists`` whether the image file is there."""
        for attribute, allowed in self._allowed.items():
            value = labels[attribute]
            if value not in allowed:
                listed = ", ".join(repr(v) for v in self.values[attribute])
                self.skip(item, f"{attribute} {value!r} is not one of the documented values ({listed})")
                return False
        if image in self._first:
            self.skip(item, f"image {image!r} listed twice: {item} repeats {self._first[image]}")
            return False
        self._first[image] = item
        if not image_exists:
            self.skip(item, f"image file {image!r} is missing")
            return False
        self.images.append(image)
        for attribute in self.values:
            self.labels[attribute].append(labels[attribute])
        return True

    def gallery(self, dataset: str, split: str, image_root: str | Path, variant: str = "") -> FaceGallery:
        """The :class:`FaceGallery` of the rows kept so far."""
        return FaceGallery(
            dataset=dataset,
            split=split,
            image_root=Path(image_root),
            images=tuple(self.images),
            labels={attribute: tuple(column) for attribute, column in self.labels.items()},
            values={attribute: tuple(listed) for attribute, listed in self.values.items()},
            variant=variant,
            skipped=tuple(self.skipped),
        )


def warn_count(what: str, found: int, expected: int) -> None:
    """Warn when ``what`` holds ``found`` entries where the release's manifest lists ``expected`` (a subset, or a
    file that is not the release's); nothing when they agree."""
    if found != expected:
        warnings.warn(
            f"{what} lists {found:,} images; the release lists {expected:,} (a subset or another version?)",
            stacklevel=3,
        )

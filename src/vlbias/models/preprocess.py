"""Image preprocessing shared by the adapters: decode, resize, centre-crop, normalise.

Done with torch ops so that one code path serves PIL images, image files and already
decoded ``(B, 3, H, W)`` float tensors in ``[0, 1]`` (BiasWorld's fast path).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from vlbias.data.images import ImageInput, load_image
from vlbias.errors import InputError
from vlbias.runtime.torch_pair import import_torchvision

TF = import_torchvision("torchvision.transforms.v2.functional")  # another torch's torchvision: one line

PREPROCESSOR_FILE = "preprocessor_config.json"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class ImageTransform:
    """Resize the shorter side to ``image_size`` (bicubic, antialiased), centre-crop to
    ``image_size`` x ``image_size`` and normalise with ``mean``/``std``. With
    ``center_crop=False`` the image is instead resized straight to ``image_size`` x
    ``image_size``, ignoring its aspect ratio (BLIP's preprocessing).

    Example:
        >>> transform = ImageTransform(image_size=8)
        >>> transform(torch.rand(2, 3, 16, 12)).shape
        torch.Size([2, 3, 8, 8])
    """

    image_size: int
    mean: tuple[float, float, float] = CLIP_MEAN
    std: tuple[float, float, float] = CLIP_STD
    center_crop: bool = True

    def __call__(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        if isinstance(images, Tensor):
            pixels = self._resize_crop(checked_image_batch(images))  # the whole batch at once: one size
        else:
            pixels = torch.stack(
                [
                    self._resize_crop(TF.to_dtype(TF.pil_to_tensor(load_image(i)), torch.float32, scale=True))
                    for i in images
                ]
            )
        pixels = pixels.clamp(0.0, 1.0)
        return TF.normalize(pixels, list(self.mean), list(self.std))

    def _resize_crop(self, image: Tensor) -> Tensor:
        square = [self.image_size, self.image_size]
        if list(image.shape[-2:]) == square:
            return image
        bicubic = TF.InterpolationMode.BICUBIC
        if not self.center_crop:
            return TF.resize(image, square, interpolation=bicubic, antialias=True)
        image = TF.resize(image, [self.image_size], interpolation=bicubic, antialias=True)
        return TF.center_crop(image, square)

    def save(self, directory: str | Path, size_key: str) -> None:
        """Write ``preprocessor_config.json`` in the fields of the model family's own image
        processor (``size_key``: ``"crop_size"`` for CLIP, ``"size"`` for BLIP)."""
        fields = {
            size_key: {"height": self.image_size, "width": self.image_size},
            "image_mean": list(self.mean),
            "image_std": list(self.std),
        }
        (Path(directory) / PREPROCESSOR_FILE).write_text(json.dumps(fields, indent=2))

    @classmethod
    def load(
        cls, name_or_path: str | Path, size_key: str, default_size: int, center_crop: bool = True
    ) -> ImageTransform:
        """The transform of ``name_or_path/preprocessor_config.json``; fields it lacks (or a hub id
        without a local file) take ``default_size`` and CLIP's mean and std. The size is either form
        transformers writes: a number (older configs, e.g. ``"crop_size": 224``) or ``{"height": ...}``
        (``{"shortest_edge": ...}`` for ``size``); a field of another shape is refused by name."""
        path = Path(name_or_path) / PREPROCESSOR_FILE
        fields = json.loads(path.read_text()) if path.is_file() else {}
        size = fields.get(size_key, default_size)
        if isinstance(size, dict):
            size = size.get("height", size.get("shortest_edge"))
        mean, std = fields.get("image_mean", CLIP_MEAN), fields.get("image_std", CLIP_STD)
        for key, valid in (
            (size_key, isinstance(size, int) and not isinstance(size, bool) and size > 0),
            ("image_mean", _three_numbers(mean)),
            ("image_std", _three_numbers(std) and all(v > 0 for v in std)),
        ):
            if not valid:
                expected = "a positive integer or {height: N}" if key == size_key else "three (positive) numbers"
                raise InputError(f"{str(path)!r}: field {key!r} is {fields.get(key)!r:.60}; expected {expected}.")
        return cls(image_size=size, mean=tuple(mean), std=tuple(std), center_crop=center_crop)


def checked_image_batch(images: Tensor) -> Tensor:
    """``images`` as float in ``[0, 1]``, refused unless a ``(B, 3, H, W)`` batch (the adapters' tensor input): a
    float tensor is taken as values in ``[0, 1]``, a ``uint8`` one (BiasWorld's pictures, a decoded image) as
    0-255 and scaled, as torchvision does; any other dtype is refused, not read on the wrong scale."""
    if images.ndim != 4 or images.shape[1] != 3:
        raise InputError(f"Expected image tensor of shape (B, 3, H, W) but got {tuple(images.shape)}.")
    if images.dtype == torch.uint8:
        return images.float() / 255.0
    if not images.is_floating_point():
        raise InputError(
            f"Expected an image tensor of floats in [0, 1] or of uint8 in [0, 255] but got dtype {images.dtype}."
        )
    return images.float()


def _three_numbers(values: object) -> bool:
    return (
        isinstance(values, (list, tuple))
        and len(values) == 3
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    )

"""Tiny image files for the face-attribute reader tests (8 x 8 pixels; the readers only check that they exist)."""

from pathlib import Path

from PIL import Image


def write_image(path: Path) -> Path:
    """An 8 x 8 grey JPEG (or PNG, by the suffix) at ``path``, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (128, 128, 128)).save(path, format="PNG" if path.suffix == ".png" else "JPEG")
    return path

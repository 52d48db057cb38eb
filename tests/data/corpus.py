"""A tiny caption corpus in Karpathy's JSON format, written by the tests that need one."""

import json
from pathlib import Path

from PIL import Image

CAPTIONS = {  # image name -> (Karpathy split, captions): the tiny models' words, with "man"/"woman"
    "m0.png": ("train", ["a man cooking", "a photo of a man"]),
    "w0.png": ("restval", ["a woman coding", "someone is coding"]),
    "m1.png": ("train", ["a man cleaning"]),
    "w1.png": ("train", ["a woman driving"]),
    "m2.png": ("val", ["a man sewing", "a person sewing"]),
    "w2.png": ("val", ["a woman repairing"]),
    "m3.png": ("test", ["a man coding", "the man is coding"]),
    "w3.png": ("test", ["a woman cooking"]),
}


def write_karpathy_corpus(root: Path, folder: str | None = "val2014", entries: list[dict] | None = None) -> Path:
    """A Karpathy JSON at ``root/dataset.json`` over 8 x 8 PNGs in ``root/images[/folder]`` (:data:`CAPTIONS`,
    plus ``entries`` appended as given, without images)."""
    images = root / "images" / (folder or "")
    images.mkdir(parents=True, exist_ok=True)
    listed = []
    for k, (name, (split, captions)) in enumerate(CAPTIONS.items()):
        Image.new("RGB", (8, 8), (30 * k, 255 - 30 * k, 90)).save(images / name)
        entry = {"filename": name, "split": split, "sentences": [{"raw": caption} for caption in captions]}
        listed.append({"filepath": folder, **entry} if folder else entry)
    path = root / "dataset.json"
    path.write_text(json.dumps({"images": listed + (entries or []), "dataset": "coco"}))
    return path

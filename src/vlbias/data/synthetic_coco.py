"""A synthetic corpus in the Karpathy COCO layout, at COCO's size, drawn from BiasWorld so that it carries a planted
bias: what the data path is benchmarked on where COCO itself is not at hand. This module says what the corpus is;
:mod:`vlbias.experiments.make_synthetic_coco` writes it (``scripts/make_synthetic_coco.py``).

The folder it writes is what :mod:`vlbias.data.captions` reads and ``configs/data/coco_captions.yaml`` points at::

    <out>/dataset_coco.json             {"images": [{"filepath", "filename", "imgid", "cocoid", "split",
                                          "sentids", "sentences": [{"raw", "tokens", "imgid", "sentid"}] x 5,
                                          "biasworld": {"group", "activity", "stereotyped", "object_visible"}}]}
    <out>/images/train2014/COCO_train2014_<cocoid:012d>.jpg      Karpathy's ``train`` images
    <out>/images/val2014/COCO_val2014_<cocoid:012d>.jpg          ``restval``, ``val`` and ``test``
    <out>/synthetic_coco.json           the settings it was written with (by the writer)

so ``vlbias fit --config configs/experiment/retrieval_coco.yaml --data.init_args.annotations
<out>/dataset_coco.json --data.init_args.image_root <out>/images`` trains on it.

**Splits.** Karpathy & Fei-Fei's split of COCO 2014 (:data:`KARPATHY_COCO`: 82,783 ``train``, 30,504 ``restval``,
5,000 ``val``, 5,000 ``test`` images) scaled to ``n_images``: ``val`` and ``test`` hold
:math:`12 \\lceil 5000\\, n / 123287 / 12 \\rceil` images each (a multiple of BiasWorld's 12 (group, activity) cells,
so both stay balanced: every cell equally often), ``restval`` :math:`\\lfloor 30504\\, n / 123287 \\rceil` (leaving ``train`` one at least), and
``train`` the rest. ``train`` and ``restval`` (which readers fold into ``train``) are BiasWorld's training items,
biased with ``bias_strength``; ``val`` and ``test`` are its balanced ``val`` and ``test`` splits.

**Images.** Item ``i`` of a BiasWorld split is rendered at 640 x 640 (:meth:`BiasWorld.render`: the figure, the
activity's object, pixel noise of ±12 per channel) and resized (bilinear) to a size drawn from
:data:`COCO_SIZES`, then saved as a JPEG (``quality``, 4:2:0 chroma subsampling, baseline): about 100 kB a file at
the default quality 95, against COCO train2014's ≈ 160 kB (13 GB over 82,783 files). COCO's photos are at
most 640 px on a side, mostly 640 x 480 or 640 x 427 and their portrait forms; :data:`COCO_SIZES` is that shape
of distribution, set by hand (not counted from COCO's annotations), with a mean of 297,000 pixels an image
(:func:`mean_pixels`).

**Captions.** Five per image: BiasWorld's own caption of the item, then four more by the same rule
(:func:`vlbias.data.biasworld.caption_for`: a fraction ``neutral_caption_rate`` leave the group unsaid), each
from a uniform draw of the image's own stream ``(seed, split, i, 3)``, which also draws its size.

Every image is written atomically (:func:`render_images`, :func:`vlbias.atomic.atomic_write`), so an interrupted
writer leaves whole files only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from vlbias.atomic import atomic_write
from vlbias.data.biasworld import ACTIVITIES, GROUPS, BiasWorld, Item, caption_for
from vlbias.data.biasworld import SPLITS as WORLD_SPLITS

#: Images per split in Karpathy & Fei-Fei's (2015) split of COCO 2014 (``dataset_coco.json``).
KARPATHY_COCO: dict[str, int] = {"train": 82_783, "restval": 30_504, "val": 5_000, "test": 5_000}
#: The COCO 2014 folder each Karpathy split's images come from.
FOLDERS: dict[str, str] = {"train": "train2014", "restval": "val2014", "val": "val2014", "test": "val2014"}
#: (width, height, probability) of an image's size (module docstring).
COCO_SIZES: tuple[tuple[int, int, float], ...] = (
    (640, 480, 0.40),
    (480, 640, 0.15),
    (640, 427, 0.20),
    (427, 640, 0.08),
    (640, 640, 0.05),
    (500, 375, 0.05),
    (612, 612, 0.04),
    (640, 360, 0.03),
)
RENDER_SIDE = 640  # BiasWorld's picture is drawn at this side, then resized to the image's size
CAPTIONS_PER_IMAGE = 5
ANNOTATIONS = "dataset_coco.json"
IMAGES = "images"
CELLS = len(GROUPS) * len(ACTIVITIES)  # BiasWorld's (group, activity) cells
MIN_IMAGES = 2 * CELLS + 1  # one balanced val and test, and one training image


@dataclass(frozen=True)
class Planned:
    """One image of the corpus: its BiasWorld ``item``, Karpathy ``split``, path under ``images/``, size and captions."""

    item: Item
    split: str
    cocoid: int
    width: int
    height: int
    captions: tuple[str, ...]

    @property
    def filepath(self) -> str:
        return FOLDERS[self.split]

    @property
    def filename(self) -> str:
        return f"COCO_{self.filepath}_{self.cocoid:012d}.jpg"


def mean_pixels() -> float:
    """The mean width x height of an image drawn from :data:`COCO_SIZES`.

    Example:
        >>> round(mean_pixels(), -3)
        297000.0
    """
    return sum(width * height * probability for width, height, probability in COCO_SIZES)


def split_sizes(n_images: int) -> dict[str, int]:
    """Images per Karpathy split for a corpus of ``n_images`` (module docstring).

    Example:
        >>> split_sizes(20_000)
        {'train': 13420, 'restval': 4948, 'val': 816, 'test': 816}
    """
    total = sum(KARPATHY_COCO.values())
    evaluation = CELLS * math.ceil(KARPATHY_COCO["val"] * n_images / total / CELLS)
    restval = min(round(KARPATHY_COCO["restval"] * n_images / total), n_images - 2 * evaluation - 1)
    return {"train": n_images - 2 * evaluation - restval, "restval": restval, "val": evaluation, "test": evaluation}


def plan_corpus(world: BiasWorld, n_images: int) -> list[Planned]:
    """Every image of the corpus, in the annotation file's order (train, restval, val, test); ``world`` has
    ``n_train`` = train + restval and ``eval_per_combination`` = val / 12 (:func:`world_for`)."""
    sizes = split_sizes(n_images)
    (widths, heights, weights) = zip(*COCO_SIZES)
    train = world.items("train")
    splits = [("train", train[: sizes["train"]]), ("restval", train[sizes["train"] :])]
    splits += [(split, world.items(split)) for split in ("val", "test")]
    planned = []
    for split, items in splits:
        for item in items:
            rng = np.random.default_rng([world.seed, WORLD_SPLITS.index(item.split), item.index, 3])
            size = rng.choice(len(COCO_SIZES), p=weights)
            more = [caption_for(item.group, item.activity, rng.random(), world.neutral_caption_rate) for _ in range(4)]
            cocoid = len(planned) + 1
            planned.append(Planned(item, split, cocoid, widths[size], heights[size], (item.caption, *more)))
    return planned


def world_for(n_images: int, bias_strength: float, neutral_caption_rate: float, hidden_object_rate: float, seed: int):
    """The :class:`BiasWorld` whose items a corpus of ``n_images`` is drawn from."""
    sizes = split_sizes(n_images)
    return BiasWorld(
        bias_strength=bias_strength,
        n_train=sizes["train"] + sizes["restval"],
        eval_per_combination=sizes["val"] // CELLS,
        image_size=RENDER_SIDE,
        neutral_caption_rate=neutral_caption_rate,
        seed=seed,
        hidden_object_rate=hidden_object_rate,
    )


def karpathy_entry(image: Planned, imgid: int) -> dict[str, object]:
    """``image``'s entry of ``dataset_coco.json`` (Karpathy's fields, and BiasWorld's ground truth)."""
    first = imgid * CAPTIONS_PER_IMAGE
    sentences = [
        {"raw": raw, "tokens": re.findall(r"[a-z]+", raw.lower()), "imgid": imgid, "sentid": first + k}
        for k, raw in enumerate(image.captions)
    ]
    truth = {key: getattr(image.item, key) for key in ("group", "activity", "stereotyped", "object_visible")}
    return {
        "filepath": image.filepath,
        "filename": image.filename,
        "imgid": imgid,
        "cocoid": image.cocoid,
        "split": image.split,
        "sentids": [sentence["sentid"] for sentence in sentences],
        "sentences": sentences,
        "biasworld": truth,
    }


def render_images(world_config: dict[str, object], images: list[Planned], root: str, quality: int) -> int:
    """Render and save ``images`` under ``root`` (each atomically) for the world of ``world_config``
    (:attr:`BiasWorld.config`); returns how many were written."""
    world = BiasWorld(**world_config)
    for image in images:
        picture = Image.fromarray(world.render(image.item)).resize(
            (image.width, image.height), Image.Resampling.BILINEAR
        )
        path = Path(root) / image.filepath / image.filename
        atomic_write(path, lambda handle, picture=picture: picture.save(handle, "JPEG", quality=quality))
    return len(images)

"""Write the synthetic COCO corpus of :mod:`vlbias.data.synthetic_coco` (``scripts/make_synthetic_coco.py``):
resumably and, when asked, in several processes.

The folder gets ``synthetic_coco.json`` (the settings) first, then the images (each atomically: an interrupted run
leaves whole files only), then ``dataset_coco.json`` last. A rerun with the same settings keeps the images already
there and writes the rest (and the annotation file, when an image was missing or it is); a folder written with
other settings, or holding anything else, is refused by name.
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from vlbias.atomic import atomic_write, remove_stale_temporaries
from vlbias.data.synthetic_coco import (
    ANNOTATIONS,
    CAPTIONS_PER_IMAGE,
    FOLDERS,
    IMAGES,
    MIN_IMAGES,
    karpathy_entry,
    plan_corpus,
    render_images,
    world_for,
)
from vlbias.data.text_files import read_json
from vlbias.errors import ConfigError

SETTINGS = "synthetic_coco.json"


def make_synthetic_coco(
    out: str = "data/coco_synthetic",
    n_images: int = 20_000,
    bias_strength: float = 0.9,
    neutral_caption_rate: float = 0.5,
    hidden_object_rate: float = 0.0,
    seed: int = 0,
    quality: int = 95,
    processes: int = 1,
) -> Path:
    """Write (or finish writing) the synthetic COCO corpus in ``out`` and return its annotation file.

    Args:
        out: Folder of the corpus (created; an earlier run's folder with the same settings is finished, not redone).
        n_images: Images in all splits together (COCO's Karpathy split has 123,287).
        bias_strength: BiasWorld's planted bias in train and restval, in [0, 1].
        neutral_caption_rate: Fraction of captions that leave the group unsaid, in [0, 1].
        hidden_object_rate: Fraction of images drawn without their activity's object, in [0, 1].
        seed: Seed of every image, size and caption.
        quality: JPEG quality, 1 to 95.
        processes: Processes that render the images.
    """
    if not isinstance(n_images, int) or n_images < MIN_IMAGES:
        raise ConfigError(f"Expected `n_images` to be an integer >= {MIN_IMAGES} but got {n_images!r}.")
    if not isinstance(quality, int) or not 1 <= quality <= 95:
        raise ConfigError(f"Expected `quality` to be an integer in [1, 95] but got {quality!r}.")
    if not isinstance(processes, int) or processes < 1:
        raise ConfigError(f"Expected `processes` to be an integer >= 1 but got {processes!r}.")
    world = world_for(n_images, bias_strength, neutral_caption_rate, hidden_object_rate, seed)
    settings = {"n_images": n_images, **world.config, "quality": quality}
    out = Path(out)
    _claim(out, settings)
    images = plan_corpus(world, n_images)
    root = out / IMAGES
    for folder in sorted(set(FOLDERS.values())):
        (root / folder).mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(root / folder)
    missing = [image for image in images if not (root / image.filepath / image.filename).is_file()]
    chunks = [missing[start : start + 64] for start in range(0, len(missing), 64)]
    if processes == 1 or len(chunks) <= 1:
        written = sum(render_images(world.config, chunk, str(root), quality) for chunk in chunks)
    else:
        spawn = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch's threads
        with ProcessPoolExecutor(processes, mp_context=spawn) as pool:
            jobs = [pool.submit(render_images, world.config, chunk, str(root), quality) for chunk in chunks]
            written = sum(job.result() for job in jobs)
    annotations = out / ANNOTATIONS
    if written or not annotations.is_file():  # written last: when it is there, every image was
        entries = {"images": [karpathy_entry(image, imgid) for imgid, image in enumerate(images)], "dataset": "coco"}
        atomic_write(annotations, lambda handle: handle.write(json.dumps(entries).encode()))
    print(f"{annotations}: {len(images):,} images ({written:,} written now), {CAPTIONS_PER_IMAGE} captions each")
    return annotations


def _claim(out: Path, settings: dict[str, object]) -> None:
    """Make ``out`` this corpus's folder: create it with its settings file, or accept it when an earlier run with the
    same settings made it; a folder with other content, or another corpus's settings, is refused by name."""
    record = out / SETTINGS
    if record.is_file():
        earlier = read_json(record, "synthetic corpus settings")
        earlier = earlier if isinstance(earlier, dict) else {}
        changed = sorted(key for key in settings.keys() | earlier.keys() if settings.get(key) != earlier.get(key))
        if changed:
            shown = ", ".join(f"{key} {earlier.get(key)!r} -> {settings.get(key)!r}" for key in changed)
            raise ConfigError(
                f"Folder {str(out)!r} holds a synthetic corpus written with other settings ({shown}); "
                "give a new folder or the same settings."
            )
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"Folder {str(out)!r} exists and is not a synthetic corpus (no {SETTINGS}); give a new folder."
        )
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(record, lambda handle: handle.write(json.dumps(settings, indent=1).encode()))

r"""The data path: caption pairs decoded, resized and collated by vlbias's caption DataLoader with N worker processes,
against the raw PIL decode of the same files in the same run, and the loader's resident memory at two corpus sizes
(``scripts/bench_dataloader.py``; the corpus: ``scripts/make_synthetic_coco.py``, or COCO itself).

**Cost.** One process, no workers: the CPU seconds (this thread's, so other processes' load on the machine does not
count) per pair that the loader spends decoding, resizing, making the tensor and collating, over ``batches``
batches of the shuffled ``train`` loader (seed 0), against the CPU seconds per image of ``PIL.Image.open(file)
.convert("RGB")`` (a full decode, nothing else) of exactly the files those batches read, in order. Their ratio is
what the loader adds to the decode; one worker with a core of its own delivers 1 / (CPU s per pair) pairs/s.

**Rate.** For each worker count N, a fresh :class:`~vlbias.data.caption_datamodule.CaptionDataModule` (seed 0, so
every N delivers the same pairs in the same order) gives its ``train`` loader; the first batch (worker start-up) is
timed on its own, then ``batches`` batches: samples/s = pairs delivered / wall seconds, and right after, the raw
decode of the same files in this process, by the wall clock too: ``ratio`` = loader samples/s / raw images/s, both
measured under the same load (on a machine others share, wall-clock rates move with their load; the ratio less).

**Memory.** The annotation file, and a copy listing every other image (half the corpus, the same image folder),
each read in a fresh process (after another process has built their ``datasets`` cache, as ``prepare_data`` does
once per node): the process's resident memory split into anonymous (its own heap: what must not grow with the
corpus) and file-backed pages (the memory-mapped Arrow files and libraries, which the kernel can drop and share),
read from ``/proc/self/status`` (Linux) after the imports, after ``setup("fit")``, and after reading every pair
row of ``train`` and ``batches`` loader batches with no workers. ``anon MiB per 1,000 images`` is the slope between
the two sizes.

**Keeping up with the GPU.** Given the training step's samples/s (``gpu_samples_per_s``, from
``scripts/bench_throughput.py``), the fewest measured workers whose rate reaches it, or, when none does, the
workers that deliver it at one core each: :math:`\lceil \text{samples/s} \times \text{CPU s per pair} \rceil`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from vlbias.errors import ConfigError, InputError
from vlbias.experiments.bench.timing import machine

MEMORY_FIELDS = ("RssAnon", "RssFile")


def resident_mib() -> dict[str, float]:
    """This process's resident memory in MiB from ``/proc/self/status``: ``RssAnon`` and ``RssFile``."""
    status = Path("/proc/self/status")
    if not status.is_file():
        raise ConfigError("The memory rows read /proc/self/status (Linux); give --memory false elsewhere.")
    fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) / 1024 for name in MEMORY_FIELDS}  # kB


def raw_decode_seconds(paths: Sequence[str], clock=time.perf_counter) -> float:
    """Seconds by ``clock`` of a full PIL decode to RGB of ``paths``, in order, in this process."""
    from PIL import Image

    start = clock()
    for path in paths:
        with Image.open(path) as picture:
            picture.convert("RGB")
    return clock() - start


def _module(annotations: str, image_root: str, image_size: int, batch_size: int, workers: int, cache_dir: str):
    from vlbias.data.caption_datamodule import CaptionDataModule

    module = CaptionDataModule(
        annotations, image_root, image_size=image_size, batch_size=batch_size, num_workers=workers, cache_dir=cache_dir
    )
    module.setup("fit")
    return module


def timed_batches(
    annotations: str,
    image_root: str,
    workers: int,
    image_size: int,
    batch_size: int,
    batches: int,
    cache_dir: str,
    clock=time.perf_counter,
) -> tuple[float, float, list[str]]:
    """The ``train`` loader's seconds by ``clock`` for ``batches`` batches after the first, the first batch's wall
    seconds (worker start-up), and the image files of the timed batches in the order they were read."""
    module = _module(annotations, image_root, image_size, batch_size, workers, cache_dir)
    loader = module.train_dataloader()
    if len(loader) < batches + 1:
        raise InputError(
            f"The train split of {annotations!r} has {len(loader)} batches of {batch_size}; --batches {batches} needs "
            f"{batches + 1} (one to start the workers): give fewer batches or a larger corpus."
        )
    paths = loader.dataset.paths
    iterator = iter(loader)
    start = time.perf_counter()
    next(iterator)
    startup = time.perf_counter() - start
    files, start = [], clock()
    for _ in range(batches):
        files += [paths[index] for index in next(iterator)["image_index"].tolist()]
    seconds = clock() - start
    del iterator, loader  # stops the workers
    return seconds, startup, files


def measure_memory(annotations: str, image_root: str, image_size: int, batch_size: int, batches: int, cache_dir: str):
    """One corpus, in this (fresh) process: prints a JSON line of the resident memory after the imports, after
    ``setup("fit")`` and after reading every pair row of ``train`` and ``batches`` batches (module docstring)."""
    import datasets

    import vlbias.data.caption_datamodule  # noqa: F401  (the imports, before the first reading)

    datasets.disable_progress_bars()
    imports = resident_mib()
    module = _module(annotations, image_root, image_size, batch_size, 0, cache_dir)
    read = resident_mib()
    loader = module.train_dataloader()
    for index in range(len(loader.dataset.pairs)):
        loader.dataset.pairs[index]
    iterator = iter(loader)
    for _ in range(min(batches, len(loader))):
        next(iterator)
    images = len(module.corpora["train"].images) + len(module.corpora["val"].images)
    print(json.dumps({"images": images, "imports": imports, "read": read, "iterated": resident_mib()}), flush=True)


def _in_fresh_process(function: str, *arguments: object) -> str:
    code = f"from vlbias.experiments.bench.dataloader import {function}; {function}(*{arguments!r})"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return done.stdout


def half_corpus(annotations: Path, out: Path) -> Path:
    """A Karpathy file listing every other image of ``annotations`` (the same image paths), written in ``out``."""
    from vlbias.data.text_files import read_json

    content = read_json(annotations, "caption file")
    half = out / f"half_{annotations.name}"
    half.write_text(json.dumps({**content, "images": content["images"][::2]}))
    return half


def workers_needed(rates: dict[int, float], target: float, seconds_per_sample: float) -> tuple[int, bool]:
    """The fewest workers whose measured samples/s (``rates``) reach ``target`` (and ``True``), else the workers that
    deliver ``target`` at one core each, ``ceil(target * seconds_per_sample)`` (and ``False``).

    Example:
        >>> workers_needed({0: 100.0, 1: 90.0, 2: 170.0}, target=150.0, seconds_per_sample=0.01)
        (2, True)
        >>> workers_needed({0: 100.0, 1: 90.0, 2: 170.0}, target=1000.0, seconds_per_sample=0.01)
        (10, False)
    """
    reaching = [workers for workers, rate in sorted(rates.items()) if rate >= target]
    if reaching:
        return reaching[0], True
    return math.ceil(target * seconds_per_sample), False


def _print_memory(sizes: list[dict]) -> None:
    """The resident memory (anonymous and file-backed MiB) after the imports, the read and the iteration, at each
    corpus size, and the anonymous MiB each 1,000 more images add."""
    print("\n| images | anon MiB: imports / read / iterated | file MiB: imports / read / iterated |")
    print("|---:|---|---|")
    for size in sizes:
        anon = " / ".join(f"{size[at]['RssAnon']:,.0f}" for at in ("imports", "read", "iterated"))
        mapped = " / ".join(f"{size[at]['RssFile']:,.0f}" for at in ("imports", "read", "iterated"))
        print(f"| {size['images']:,} | {anon} | {mapped} |")
    small, large = sizes
    growth = (large["iterated"]["RssAnon"] - small["iterated"]["RssAnon"]) / (large["images"] - small["images"])
    print(f"anon MiB per 1,000 images: {1000 * growth:.2f}")


def bench_dataloader(
    annotations: str = "data/coco_synthetic/dataset_coco.json",
    image_root: str | None = None,
    workers: Sequence[int] | None = None,
    image_size: int = 256,
    batch_size: int = 32,
    batches: int = 10,
    memory: bool = True,
    gpu_samples_per_s: float | None = None,
) -> dict[int, float]:
    """Print the loader's samples/s per worker count against the raw decode, its memory at two corpus sizes, and
    the workers a GPU step needs; returns samples/s per worker count.

    Args:
        annotations: Karpathy split JSON of the corpus (scripts/make_synthetic_coco.py writes one).
        image_root: Folder of its images (default: ``images`` beside the annotation file).
        workers: Worker counts to time (default 0, 1, ... up to this machine's cores).
        image_size: Side the images are resized to (ALBEF-base trains at 256, its COCO retrieval at 384).
        batch_size: Pairs per batch.
        batches: Batches timed per worker count, after one that starts the workers.
        memory: Measure resident memory at the corpus's size and at half of it.
        gpu_samples_per_s: The GPU training step's samples/s (scripts/bench_throughput.py): prints the workers that keep up.
    """
    import datasets

    datasets.disable_progress_bars()
    annotations_path = Path(annotations)
    image_root = image_root or str(annotations_path.parent / "images")
    cores = len(os.sched_getaffinity(0))
    workers = list(range(cores + 1)) if workers is None else list(workers)
    if not workers or min(workers) < 0 or batches < 1:
        raise ConfigError(f"Expected --workers >= 0 (one or more) and --batches >= 1 but got {workers} and {batches}.")
    rates: dict[int, float] = {}
    raws: dict[int, float] = {}
    startups: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="vlbias-bench-dataloader-") as scratch:
        cache = str(Path(scratch) / "cache")
        setting = (annotations, image_root)
        loader_cpu, _, files = timed_batches(*setting, 0, image_size, batch_size, batches, cache, time.thread_time)
        raw_cpu = raw_decode_seconds(files, time.thread_time)
        for count in workers:
            seconds, startups[count], files = timed_batches(*setting, count, image_size, batch_size, batches, cache)
            rates[count], raws[count] = len(files) / seconds, len(files) / raw_decode_seconds(files)
        sizes = []
        if memory:
            for corpus in (half_corpus(annotations_path, Path(scratch)), annotations_path):
                arguments = (str(corpus), image_root, image_size, batch_size, batches, cache)
                _in_fresh_process("_module", *arguments[:4], 0, cache)  # builds the datasets cache, as prepare_data
                sizes.append(json.loads(_in_fresh_process("measure_memory", *arguments).splitlines()[-1]))
    per_sample = loader_cpu / len(files)
    print(
        f"{machine()}, {cores} cores; {annotations}: train pairs, {image_size} px, batch {batch_size}, {batches} batches"
    )
    print(
        f"CPU per pair, no workers: loader {1000 * per_sample:.2f} ms, raw PIL decode of the same {len(files):,} files "
        f"{1000 * raw_cpu / len(files):.2f} ms (ratio {loader_cpu / raw_cpu:.2f}): one worker on a core of its own "
        f"delivers {1 / per_sample:,.0f} pairs/s\n"
    )
    print("| workers | samples/s | raw decode images/s | ratio | first batch s |\n|---:|---:|---:|---:|---:|")
    for count in workers:
        print(
            f"| {count} | {rates[count]:,.1f} | {raws[count]:,.1f} | {rates[count] / raws[count]:.2f} | "
            f"{startups[count]:.2f} |"
        )
    if sizes:
        _print_memory(sizes)
    if gpu_samples_per_s is None:
        print(
            "\nGPU step: not given (--gpu_samples_per_s, from scripts/bench_throughput.py); workers needed not computed"
        )
    else:
        needed, measured = workers_needed(rates, gpu_samples_per_s, per_sample)
        how = "measured" if measured else f"at one core each, from the CPU per pair; this machine has {cores}"
        print(f"\nGPU step {gpu_samples_per_s:,.1f} samples/s: {needed} workers keep up ({how})")
    return rates

"""Readers of image-caption corpora (COCO, Flickr30K) with their images in a local folder.

Two annotation formats, told apart by the file's first character:

* **Karpathy split JSON** (``dataset_coco.json``, ``dataset_flickr30k.json``; ``{``):
  ``{"images": [{"filepath"?: "val2014", "filename": "x.jpg", "split": "train|restval|val|test",
  "sentences": [{"raw": "..."}, ...]}, ...]}``. The image is ``<image_root>/<filepath>/<filename>``
  (Flickr30K has no ``filepath``: ``<image_root>/<filename>``). ``restval`` is folded into ``train``,
  as every paper since Karpathy & Fei-Fei (2015) does. One file holds every split.
* **ALBEF/LAVIS annotation JSON** (``[``), one file per split: training files list pairs,
  ``[{"image": "path", "caption": "...", "image_id": ...}]`` (an image recurs once per caption and its
  rows are merged); evaluation files list images, ``[{"image": "path", "caption": ["...", ...]}]``.

:func:`read_captions` gives one split as a :class:`CaptionSplit`: the unique images and an Arrow-backed,
memory-mapped ``datasets.Dataset`` of caption pairs (one row per (image, caption): what MLM/ITM/FairVLP
training reads); :meth:`CaptionSplit.retrieval` gives the evaluation view (all images, all captions,
``caption_to_image`` and ``image_to_captions``: the ground truth of TR/IR recall). The file is read
with ``datasets.load_dataset("json")`` (cached as Arrow, so COCO's 600k captions are not Python objects
in every dataloader worker) and normalised with ``Dataset.map`` (``num_proc`` processes when asked).

What cannot be used is skipped, not fatal, and returned in ``skipped`` as ``{"item", "reason"}``: an
entry without a file name, an image path that leaves ``image_root`` (absolute, or through ``..``), a repeat of
an image already listed (the first listing wins, across splits: an image in two splits is a leak), an empty
(or null) caption, an image whose captions are all empty or whose caption list is empty, and an image file that
is missing (checked for every image, cheaply: existence) or, with ``verify_images=True``, does not decode. A file
that is not such a corpus at all (missing, not JSON, a Karpathy object without ``images``, a caption that is not
text, such as the number ``12345``, named with its entry; no entry of the split asked for) raises
:class:`~vlbias.errors.InputError`; a split name other than :data:`SPLITS` raises
:class:`~vlbias.errors.ConfigError`.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import datasets

from vlbias.data.images import image_problem
from vlbias.data.text_files import read_json
from vlbias.errors import ConfigError, InputError

SPLITS: tuple[str, ...] = ("train", "val", "test")
KARPATHY_SPLITS: dict[str, str] = {"train": "train", "restval": "train", "val": "val", "test": "test"}


@dataclass(frozen=True)
class RetrievalSplit:
    """The retrieval evaluation view of one split: every image and every caption with the ground truth.

    ``caption_to_image[c]`` is the index in ``images`` of caption ``c``'s image (image retrieval's
    answer); ``image_to_captions[i]`` the indices in ``captions`` of image ``i``'s captions (text
    retrieval's answers). ``images`` are paths relative to ``image_root`` (:attr:`image_paths`: joined).
    """

    image_root: Path
    images: list[str]
    captions: list[str]
    caption_to_image: list[int]
    image_to_captions: list[list[int]]
    skipped: list[dict[str, str]] = field(default_factory=list)

    @property
    def image_paths(self) -> list[Path]:
        return [self.image_root / image for image in self.images]


@dataclass(frozen=True)
class CaptionSplit:
    """One split of a caption corpus.

    ``images``: unique image paths relative to ``image_root``, in the file's order. ``pairs``: a
    ``datasets.Dataset`` with one row per (image, caption), columns ``image_index`` (into ``images``)
    and ``caption``. ``skipped``: what was left out, ``{"item", "reason"}`` each (module docstring).
    """

    path: Path
    split: str
    image_root: Path
    images: list[str]
    pairs: datasets.Dataset
    skipped: list[dict[str, str]]

    def retrieval(self) -> RetrievalSplit:
        """The evaluation view (:class:`RetrievalSplit`) of the same images and captions."""
        caption_to_image = list(self.pairs["image_index"])
        image_to_captions: list[list[int]] = [[] for _ in self.images]
        for caption, image in enumerate(caption_to_image):
            image_to_captions[image].append(caption)
        return RetrievalSplit(
            self.image_root, self.images, list(self.pairs["caption"]), caption_to_image, image_to_captions, self.skipped
        )


def read_captions(
    path: str | Path,
    split: str,
    image_root: str | Path,
    verify_images: bool = False,
    num_proc: int | None = None,
    cache_dir: str | Path | None = None,
) -> CaptionSplit:
    """``split`` of the Karpathy or ALBEF/LAVIS annotation file at ``path`` (format by its first character).

    Args:
        path: the annotation JSON.
        split: one of :data:`SPLITS`; for an ALBEF/LAVIS file (one split per file) it only names the split.
        image_root: the folder the file's image paths are relative to.
        verify_images: decode every image once (slow on COCO) instead of only checking that it exists.
        num_proc: processes for normalising the entries and checking the images (``None``: this one).
        cache_dir: the ``datasets`` cache for the Arrow files (``None``: ``HF_DATASETS_CACHE``).
    """
    if split not in SPLITS:
        raise ConfigError(f"Expected `split` to be one of {', '.join(SPLITS)} but got {split!r}.")
    path, image_root = Path(path), Path(image_root)
    kind = sniff_format(path)
    entries, pairs_file = load_entries(path, kind, split, num_proc, cache_dir)
    rows, candidates, skipped = _select(path, split, entries, pairs_file)
    problems = _image_problems_of(candidates, image_root, verify_images, num_proc)
    skipped += [{"item": image, "reason": problem} for image, problem in zip(candidates, problems) if problem]
    images = [image for image, problem in zip(candidates, problems) if not problem]
    index = {image: i for i, image in enumerate(images)}
    rows = [(row, index[image]) for row, image in rows if image in index]
    if not rows:
        first = f": {skipped[0]['item']}: {skipped[0]['reason']}" if skipped else ""
        raise InputError(
            f"{path}: split {split!r} has no usable image and caption ({len(skipped)} entries skipped{first}); "
            f"expected its images under {str(image_root)!r}"
        )
    kept = entries.select([row for row, _ in rows]).add_column("image_index", [i for _, i in rows])
    pairs = kept.map(_explode, batched=True, remove_columns=kept.column_names, num_proc=num_proc)
    return CaptionSplit(path, split, image_root, images, pairs, skipped)


def sniff_format(path: Path) -> str:
    """``"karpathy"`` (a JSON object) or ``"annotations"`` (a JSON array), from the first non-blank byte."""
    if not path.is_file():
        raise InputError(f"Caption file {str(path)!r} does not exist.")
    with path.open("rb") as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")  # a byte-order mark and blanks
    if head[:1] == b"{":
        return "karpathy"
    if head[:1] == b"[":
        return "annotations"
    raise InputError(
        f"Caption file {str(path)!r} is not a Karpathy split JSON (an object with `images`) nor an "
        f"ALBEF/LAVIS annotation JSON (an array); it starts with {head[:20]!r}."
    )


def load_entries(
    path: Path, kind: str, split: str, num_proc: int | None = None, cache_dir: str | Path | None = None
) -> tuple[datasets.Dataset, bool]:
    """The file's entries as a ``datasets.Dataset``, one row per listing, normalised to the columns
    ``entry`` (position in the file), ``image``, ``split``, ``captions`` (the non-empty ones, stripped)
    and their number ``n_captions``, ``empty`` (positions of the empty ones) and ``problem`` (why the entry is unusable, or ""); and
    whether the rows are (image, caption) pairs (an ALBEF training file: ``caption`` a string)."""
    try:
        raw = datasets.load_dataset(
            "json",
            data_files=str(path),
            field="images" if kind == "karpathy" else None,
            split="train",  # the builder's name for "all rows"; the corpus's split is a column
            cache_dir=None if cache_dir is None else str(cache_dir),
        )
    except datasets.exceptions.DatasetGenerationError as err:
        if isinstance(err.__cause__, KeyError) and kind == "karpathy":
            raise InputError(
                f"Karpathy caption file {str(path)!r} has no `images` key; expected "
                '{"images": [{"filename", "split", "sentences": [{"raw"}]}]}.'
            ) from err
        _refuse_non_text_captions(path, kind)  # Arrow's message quotes a valid caption, not the one at fault
        raise InputError(f"Caption file {str(path)!r} is not valid {kind} JSON: {err.__cause__ or err}") from err
    except ValueError as err:  # datasets: 'Instruction "train" corresponds to no data!'
        if "corresponds to no data" not in str(err):
            raise
        listed = '`images`, {"images": [...]}' if kind == "karpathy" else "the array"
        raise InputError(
            f"Caption file {str(path)!r} lists no image: {listed} is empty; expected at least one entry with its "
            "image and captions."
        ) from None
    pairs_file = kind == "annotations" and raw.features.get("caption") == datasets.Value("string")
    normalise = partial(_karpathy_entries, path=str(path))
    if kind == "annotations":
        normalise = partial(_annotation_entries, path=str(path), split=split)
    entries = raw.map(normalise, batched=True, with_indices=True, remove_columns=raw.column_names, num_proc=num_proc)
    return entries, pairs_file


def _karpathy_entries(batch: dict[str, list], indices: list[int], path: str) -> dict[str, list]:
    n, out = len(indices), _entry_columns(indices)
    for entry, folder, name, split, sentences in zip(
        indices, batch.get("filepath", [None] * n), batch.get("filename", [None] * n), batch.get("split", [None] * n),
        batch.get("sentences", [None] * n),
    ):  # fmt: skip
        raws = _karpathy_captions(sentences)
        _refuse_non_text(path, entry, name, raws)
        image = f"{folder}/{name}" if folder and name else name
        _append(out, image, KARPATHY_SPLITS.get(split, split), raws)
        if not name:
            out["problem"][-1] = "entry without `filename`"
        elif split is None:
            out["problem"][-1] = "entry without `split`"
    return out


def _annotation_entries(batch: dict[str, list], indices: list[int], path: str, split: str) -> dict[str, list]:
    n, out = len(indices), _entry_columns(indices)
    for entry, image, caption in zip(indices, batch.get("image", [None] * n), batch.get("caption", [None] * n)):
        raws = _annotation_captions(caption)
        _refuse_non_text(path, entry, image, raws)
        _append(out, image, split, raws)
        if not image:
            out["problem"][-1] = "entry without `image`"
    return out


def _karpathy_captions(sentences: object) -> list:
    """The ``raw`` values of a Karpathy entry's ``sentences``."""
    return [sentence.get("raw") if isinstance(sentence, dict) else sentence for sentence in sentences or []]


def _annotation_captions(caption: object) -> list:
    """An ALBEF/LAVIS entry's ``caption`` (one, or a list) as a list."""
    return [] if caption is None else list(caption) if isinstance(caption, list) else [caption]


def _refuse_non_text(path: str, entry: int, image: object, raws: list) -> None:
    """Refuse entry ``entry`` when one of its captions is neither text nor null (null, like "", is an empty caption:
    skipped), naming the entry, its image and the value."""
    for raw in raws:
        if raw is not None and not isinstance(raw, str):
            raise InputError(
                f"Caption file {path!r}, entry {entry} (image {image!r}): caption {raw!r} ({type(raw).__name__}) is "
                "not text; expected a string."
            )


def _refuse_non_text_captions(path: Path, kind: str) -> None:
    """:func:`_refuse_non_text` over every entry of the file read as plain JSON (when Arrow could not read it)."""
    try:
        content = read_json(path, "caption file")
    except InputError:
        return  # not JSON: the caller says so
    entries = content.get("images") if kind == "karpathy" and isinstance(content, dict) else content
    for entry, listing in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(listing, dict):
            continue
        if kind == "karpathy":
            raws, image = _karpathy_captions(listing.get("sentences")), listing.get("filename")
        else:
            raws, image = _annotation_captions(listing.get("caption")), listing.get("image")
        if isinstance(raws, list):
            _refuse_non_text(str(path), entry, image, raws)


def _entry_columns(indices: list[int]) -> dict[str, list]:
    """The columns of a batch of normalised entries, empty but for the entries' indices; :func:`_append` fills a
    row."""
    return {"entry": indices, "image": [], "split": [], "captions": [], "n_captions": [], "empty": [], "problem": []}


def _append(out: dict[str, list], image: str | None, split: str | None, raws: list) -> None:
    captions = [raw.strip() for raw in raws if isinstance(raw, str) and raw.strip()]
    out["image"].append(image or "")
    out["split"].append(split)
    out["captions"].append(captions)
    out["n_captions"].append(len(captions))
    out["empty"].append([k for k, raw in enumerate(raws) if not (isinstance(raw, str) and raw.strip())])
    out["problem"].append(_outside_root(image) if image else "")


def _outside_root(image: str) -> str:
    """Why the image path ``image`` (relative to ``image_root``) leaves ``image_root``, or "" when it stays inside:
    an absolute path, or one whose ``..`` climb above it. Judged on the path as written, so a symbolic link inside
    ``image_root`` (to images kept elsewhere) is followed as usual."""
    normal = posixpath.normpath(image)
    if posixpath.isabs(normal) or normal == ".." or normal.startswith("../"):
        return f"image path {image!r} leaves `image_root` (expected a path inside it)"
    return ""


def _select(
    path: Path, split: str, entries: datasets.Dataset, pairs_file: bool
) -> tuple[list[tuple[int, str]], list[str], list[dict[str, str]]]:
    """The usable rows of ``split`` as ``(row, image)``, its unique images in order, and the skipped entries.

    ``pairs_file``: the rows are (image, caption) pairs (an ALBEF training file), so an image recurs by
    design; otherwise each row lists one image, and a repeat of an image is skipped."""
    columns = entries.select_columns(["entry", "image", "split", "empty", "problem"]).to_dict()
    counts = entries["n_captions"]  # not the captions themselves: they stay in Arrow
    present = set(columns["split"]) - {None}
    if split not in present:
        raise InputError(
            f"Caption file {str(path)!r} has no entry of split {split!r}; its splits are {sorted(present) or 'none'}."
        )
    first: dict[str, int] = {}  # image, as a normalised path (``a/../a/x.png`` is ``a/x.png``) -> its first entry
    rows: list[tuple[int, str]] = []
    candidates: dict[str, None] = {}  # an ordered set
    skipped: list[dict[str, str]] = []
    for row, (entry, image, entry_split, empty, problem) in enumerate(zip(*columns.values())):
        same = posixpath.normpath(image) if image else image
        if entry_split != split:
            if image and not problem:
                first.setdefault(same, entry)
            continue
        item = image or f"entry {entry}"
        if problem:
            skipped.append({"item": item, "reason": f"{problem} (entry {entry})"})
            continue
        if not pairs_file:
            if same in first:
                reason = f"image listed twice: entry {entry} repeats entry {first[same]}"
                skipped.append({"item": item, "reason": reason})
                continue
            first[same] = entry
            if counts[row] == 0:
                reason = f"all {len(empty)} captions are empty" if empty else "empty caption list"
                skipped.append({"item": item, "reason": f"{reason} (entry {entry})"})
                continue
        skipped += [{"item": f"{item} caption {k}", "reason": f"empty caption (entry {entry})"} for k in empty]
        if counts[row]:
            candidates[image] = None
            rows.append((row, image))
    return rows, list(candidates), skipped


def _image_problems_of(images: list[str], root: Path, decode: bool, num_proc: int | None) -> list[str]:
    """Why each image cannot be used ("" when it can), checked with ``Dataset.map`` over ``num_proc`` processes."""
    if not images:
        return []
    table = datasets.Dataset.from_dict({"image": images})
    check = partial(_image_problems, root=str(root), decode=decode)
    return list(table.map(check, batched=True, num_proc=num_proc)["problem"])


def _image_problems(batch: dict[str, list], root: str, decode: bool) -> dict[str, list]:
    """Why each image of ``batch`` cannot be used: missing, or (``decode``) unreadable by the project's one
    image reader (:func:`vlbias.data.images.image_problem`: truncated, a dangling link, an unsupported mode)."""
    problems = []
    for name in batch["image"]:
        file = Path(root) / name
        if not file.is_file():
            problems.append(f"image file {str(file)!r} is missing")
            continue
        reason = image_problem(file) if decode else None
        problems.append(f"image file {str(file)!r} {reason}" if reason else "")
    return {"problem": problems}


def _explode(batch: dict[str, list]) -> dict[str, list]:
    """One row per (image, caption) from one row per listing."""
    out: dict[str, list] = {"image_index": [], "caption": []}
    for image_index, captions in zip(batch["image_index"], batch["captions"]):
        out["image_index"] += [image_index] * len(captions)
        out["caption"] += captions
    return out

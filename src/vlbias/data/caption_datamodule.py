"""A LightningDataModule over an image-caption corpus (COCO, Flickr30K) read by :mod:`vlbias.data.captions`."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch import LightningDataModule
from PIL import Image
from torch.utils.data import Dataset, default_collate

from vlbias.data.captions import SPLITS, CaptionSplit, RetrievalSplit, load_entries, read_captions, sniff_format
from vlbias.data.images import load_image
from vlbias.data.resumable import SplitLoaders
from vlbias.errors import ConfigError, InputError

logger = logging.getLogger(__name__)
STAGE_SPLITS: dict[str | None, tuple[str, ...]] = {
    "fit": ("train", "val"),
    "validate": ("val",),
    "test": ("test",),
    "predict": (),  # set from ``predict_split``
    None: SPLITS,
}


class CaptionPairDataset(Dataset):
    """The caption pairs of one split as dicts: ``pixel_values`` (3, S, S) float in [0, 1] (the image
    resized to S x S, bicubic, as ALBEF's evaluation transform; no augmentation), ``caption`` (str) and
    ``image_index`` (int, into the split's ``images``).

    An image that exists but does not decode (found here only when the corpus was read without
    ``verify_images``) gives ``None`` with a warning naming the file; :func:`collate_pairs` drops it.
    """

    def __init__(self, corpus: CaptionSplit, image_size: int) -> None:
        self.pairs = corpus.pairs.with_format(None)
        self.paths = [str(corpus.image_root / image) for image in corpus.images]
        self.image_size = image_size

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def n_images(self) -> int:
        """The split's images: the image gallery of retrieval (its caption gallery is the rows)."""
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, object] | None:
        row = self.pairs[index]
        path = self.paths[row["image_index"]]
        try:
            picture = load_image(path).resize((self.image_size,) * 2, Image.Resampling.BICUBIC)
        except InputError as err:  # vlbias.data.images: missing, truncated, an unsupported mode
            warnings.warn(f"{err}; its caption pair is dropped.", stacklevel=2)
            return None
        pixels = torch.from_numpy(np.asarray(picture, dtype=np.float32) / 255.0).permute(2, 0, 1)  # (3, S, S)
        return {"pixel_values": pixels, "caption": row["caption"], "image_index": row["image_index"]}


def collate_pairs(items: list[dict[str, object] | None]) -> dict[str, object]:
    """``default_collate`` of the items that loaded (``pixel_values`` (B, 3, S, S), ``caption`` list of
    B str, ``image_index`` (B,) long). A batch none of whose images decodes raises :class:`InputError`."""
    loaded = [item for item in items if item is not None]
    if not loaded:
        raise InputError(
            f"No image of a batch of {len(items)} decodes; read the corpus with `verify_images: true` to skip them."
        )
    return default_collate(loaded)


class CaptionDataModule(SplitLoaders, LightningDataModule):
    """Caption pairs of a COCO/Flickr30K-style corpus as train/val/test dataloaders, and the retrieval view.

    Batches are dicts ``pixel_values`` (B, 3, S, S) float in [0, 1], ``caption`` (list of B str) and
    ``image_index`` (B,) long (:class:`CaptionPairDataset`): what :class:`~vlbias.modules.MaskedLMPretraining`
    and :class:`~vlbias.modules.FairVLP` read with ``image_key: pixel_values``, ``caption_key: caption`` and
    no label keys (ITM negatives are then the batch's other captions, positive only where identical).
    :meth:`retrieval` gives a split's evaluation view (every image, every caption, the ground truth).

    Splits are read in :meth:`setup` (every rank) and warmed into the ``datasets`` cache in
    :meth:`prepare_data` (once per node). What was skipped (missing or corrupt images, repeats, empty
    captions) is logged as a warning with a count and the first names, and kept in ``self.skipped[split]``.

    Args:
        annotations: a Karpathy split JSON with every split (e.g. ``data/coco/dataset_coco.json``), or a
            mapping ``{split: file}`` of ALBEF/LAVIS annotation files (or Karpathy files) per split.
        image_root: the folder the annotation's image paths are relative to (e.g. ``data/coco/images``).
        image_size: the side S the images are resized to.
        batch_size: pairs per batch, per device (under DDP the global batch is ``batch_size * devices``).
        num_workers: dataloader worker processes.
        verify_images: decode every image once when reading (else only existence is checked up front).
        num_proc: processes for reading the annotations and checking the images (``None``: one).
        cache_dir: the ``datasets`` cache (``None``: ``HF_DATASETS_CACHE``).
        seed: seed of the training shuffle.
        predict_split: the split ``predict_dataloader`` serves.
    """

    collate_fn = staticmethod(collate_pairs)

    def __init__(
        self,
        annotations: str | dict[str, str],
        image_root: str,
        image_size: int = 256,
        batch_size: int = 64,
        num_workers: int = 0,
        verify_images: bool = False,
        num_proc: int | None = None,
        cache_dir: str | None = None,
        seed: int = 0,
        predict_split: str = "test",
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if isinstance(annotations, dict):
            unknown = sorted(set(annotations) - set(SPLITS))
            if unknown:
                raise ConfigError(f"Expected `annotations` keys among {', '.join(SPLITS)} but got {unknown}.")
            self.files = {split: Path(file) for split, file in annotations.items()}
        else:
            self.files = {split: Path(annotations) for split in SPLITS}
        if predict_split not in SPLITS:
            raise ConfigError(f"Expected `predict_split` to be one of {', '.join(SPLITS)} but got {predict_split!r}.")
        for file in set(self.files.values()):
            if not file.is_file():
                raise InputError(f"Caption file {str(file)!r} (`data.annotations`) does not exist.")
        if not Path(image_root).is_dir():
            raise InputError(f"Image folder {image_root!r} (`data.image_root`) does not exist.")
        self.corpora: dict[str, CaptionSplit] = {}
        self.skipped: dict[str, list[dict[str, str]]] = {}

    def _file(self, split: str) -> Path:
        if split not in self.files:
            raise ConfigError(f"`annotations` has no file for split {split!r}; it has {', '.join(self.files)}.")
        return self.files[split]

    def _read(self, split: str) -> CaptionSplit:
        if split not in self.corpora:
            hp = self.hparams
            corpus = read_captions(self._file(split), split, hp.image_root, hp.verify_images, hp.num_proc, hp.cache_dir)
            if corpus.skipped:
                names = ", ".join(entry["item"] for entry in corpus.skipped[:5])
                logger.warning(f"{split}: skipped {len(corpus.skipped)} entries of {corpus.path} (first: {names}).")
            self.corpora[split], self.skipped[split] = corpus, corpus.skipped
        return self.corpora[split]

    def prepare_data(self) -> None:
        """Load every annotation file once, so that the ``datasets`` cache holds its Arrow files before the
        ranks read them (no state is kept: Lightning calls this on one process per node)."""
        hp = self.hparams
        for split, file in self.files.items():
            load_entries(file, sniff_format(file), split, hp.num_proc, hp.cache_dir)

    def setup(self, stage: str | None = None) -> None:
        splits = (self.hparams.predict_split,) if stage == "predict" else STAGE_SPLITS[stage]
        for split in splits:
            self._read(split)

    def retrieval(self, split: str) -> RetrievalSplit:
        """``split``'s evaluation view: all images, all captions, ``caption_to_image`` and ``image_to_captions``."""
        if split not in SPLITS:
            raise ConfigError(f"Expected `split` to be one of {', '.join(SPLITS)} but got {split!r}.")
        return self._read(split).retrieval()

    def _dataset(self, split: str) -> CaptionPairDataset:
        return CaptionPairDataset(self._read(split), self.hparams.image_size)

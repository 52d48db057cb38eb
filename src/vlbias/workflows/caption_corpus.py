"""The caption corpus on which ``vlbias debias`` measures retrieval R@K before and after each method
(:func:`~vlbias.workflows.comparison.recall_with_intervals`).

Two sources (``--captions``): ``'biasworld'``, a fold's world's ``test`` split (its images, each with its one
caption: the retrieval ground truth of :mod:`vlbias.modules.retrieval`, where an image's answer is its own caption
and a caption's its own image), or a caption annotation file (Karpathy or ALBEF/LAVIS JSON,
:func:`~vlbias.data.captions.read_captions`), its ``test`` split, the images under ``caption_images`` (the file's
folder when not given).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from vlbias.data.biasworld import BiasWorld
from vlbias.data.captions import read_captions
from vlbias.models.base import ModelAdapter
from vlbias.models.embedding import text_encoder, unit_image_embeddings

#: The ``--captions`` value of BiasWorld's own captions.
BIASWORLD_CAPTIONS = "biasworld"
#: The split of the corpus R@K is measured on.
CAPTION_SPLIT = "test"


@dataclass(frozen=True)
class CaptionCorpus:
    """Images (``(n, 3, S, S)`` uint8, or paths) and captions, caption ``c`` of image ``caption_to_image[c]``."""

    images: Tensor | list[Path]
    captions: list[str]
    caption_to_image: Tensor  # (m,) int64

    def embed(self, adapter: ModelAdapter, batch_size: int) -> dict[str, object]:
        """The corpus embedded by ``adapter``: ``images`` ``(n, D)``, ``captions`` ``(m, D)`` (unit, float32, CPU),
        with ``texts`` (the captions' strings, which per-query methods read) and ``caption_to_image``."""
        return {
            "images": unit_image_embeddings(adapter, self.images, batch_size),
            "captions": text_encoder(adapter)(self.captions),
            "texts": self.captions,
            "caption_to_image": self.caption_to_image,
        }


def biasworld_captions(world: BiasWorld) -> CaptionCorpus:
    """``world``'s :data:`CAPTION_SPLIT` split: every image with its own caption."""
    items = world.items(CAPTION_SPLIT)
    return CaptionCorpus(world.images(CAPTION_SPLIT), [item.caption for item in items], torch.arange(len(items)))


def file_captions(path: str, image_root: str | None) -> CaptionCorpus:
    """The :data:`CAPTION_SPLIT` split of the annotation file ``path``, images under ``image_root`` (default: the
    file's folder); what :func:`~vlbias.data.captions.read_captions` cannot read is refused there, naming it."""
    root = Path(image_root) if image_root is not None else Path(path).parent
    split = read_captions(path, CAPTION_SPLIT, root).retrieval()
    return CaptionCorpus(split.image_paths, split.captions, torch.tensor(split.caption_to_image, dtype=torch.long))

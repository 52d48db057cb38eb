"""Many images or texts embedded by an EMBED adapter in batches, under :func:`~vlbias.models.inference.measuring`:
the one loop that the suites (a gallery, a batch of images to classify) and the debiasers' fitting data share.

Each batch is ``adapter.embed_images(adapter.prepare_images(batch))`` (or the texts' twin), as float32 on the CPU,
in the order given; the batches are concatenated, so the rows are those of one call per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import InputError
from vlbias.models.base import ModelAdapter
from vlbias.models.inference import measuring


def embed_image_batches(
    adapter: ModelAdapter, images: Tensor | Sequence, batch_size: int, skip_unreadable: bool = False
) -> tuple[Tensor, list[int], list[tuple[int, str]]]:
    """The ``(n', D)`` float32 CPU embeddings of ``images`` (a ``(n, 3, H, W)`` tensor in [0, 1], or paths / PIL
    images) in batches of ``batch_size``, the indices into ``images`` of their rows, and ``(index, reason)`` of each
    image left out.

    A batch that fails to decode (:class:`~vlbias.errors.InputError`) is raised, or, when ``skip_unreadable``, embedded
    image by image, so that only the images that do not decode are left out, each with its error's message. With no
    image embedded the embeddings are ``(0, 0)``.

    Example:
        >>> from vlbias.models.families.clip import CLIPAdapter
        >>> embeddings, kept, left_out = embed_image_batches(CLIPAdapter.tiny(), torch.rand(3, 3, 32, 32), 2)
        >>> embeddings.shape, kept, left_out
        (torch.Size([3, 64]), [0, 1, 2], [])
    """
    parts, kept, left_out = [], [], []
    with measuring(adapter.device):
        for start in range(0, len(images), batch_size):
            indices = list(range(start, min(start + batch_size, len(images))))
            try:
                parts.append(_embedded(adapter, images[start : start + batch_size]))
                kept += indices
            except InputError:
                if not skip_unreadable:
                    raise
                for index in indices:  # find the images that do not decode; embed the others
                    try:
                        parts.append(_embedded(adapter, images[index : index + 1]))
                        kept.append(index)
                    except InputError as err:
                        left_out.append((index, str(err)))
    return (torch.cat(parts) if parts else torch.empty(0, 0)), kept, left_out


def unit_image_embeddings(adapter: ModelAdapter, images: Tensor | Sequence, batch_size: int = 64) -> Tensor:
    """``(n, D)`` unit float32 CPU embeddings of ``images`` (:func:`embed_image_batches`; an image that does not
    decode is raised)."""
    return F.normalize(embed_image_batches(adapter, images, batch_size)[0], dim=-1)


def text_encoder(adapter: ModelAdapter, batch_size: int = 256) -> Callable[[Sequence[str]], Tensor]:
    """``texts -> (len(texts), D)`` unit float32 CPU embeddings by ``adapter`` (batches of ``batch_size``)."""

    def encode(texts: Sequence[str]) -> Tensor:
        texts = list(texts)
        if not texts:
            raise InputError("Expected at least one text to embed but got none")
        with measuring(adapter.device):
            pieces = [
                adapter.embed_texts(adapter.prepare_texts(texts[start : start + batch_size])).float().cpu()
                for start in range(0, len(texts), batch_size)
            ]
        return F.normalize(torch.cat(pieces), dim=-1)

    return encode


def _embedded(adapter: ModelAdapter, images: Tensor | Sequence) -> Tensor:
    return adapter.embed_images(adapter.prepare_images(images)).float().cpu()

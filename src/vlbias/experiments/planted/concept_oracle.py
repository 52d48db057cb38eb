"""A ranker whose ranking by concept is known: the ground-truth concept adapter of the planted gallery-skew table.

:class:`ConceptOracle` is an EMBED adapter over one labelled gallery held in memory (BiasWorld's planted gallery,
:mod:`vlbias.data.biasworld_gallery`). An image embeds to the one-hot vector of the concept its labels give (the
image is found by its pixels, so an image the gallery does not hold is refused); a text embeds to the one-hot vector
of the one concept it names as a word (``"a person cooking."`` -> ``cooking``), or to zeros when it names none or
several (it then scores 0 against every image: a ranking by index alone). So every query ranks the images of its
concept first, all tied, and the others after them: the top K (K at most the concept's images) holds only images of
the concept, chosen among them by the tie rule of the protocol (``index``: the gallery's order, a seeded permutation).
What a statistic then reports about gender or tone is what the gallery planted, with no model error in between.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.data.face_gallery import FaceGallery
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ModelAdapter


def _key(pixels: Tensor) -> bytes:
    """An image's identity: its pixels as uint8 bytes (a float image in [0, 1] rounded back to 0..255)."""
    if pixels.is_floating_point():
        pixels = (pixels * 255).round()
    return pixels.to(torch.uint8).contiguous().numpy().tobytes()


class ConceptOracle(ModelAdapter):
    """EMBED by ground truth over ``gallery`` (module docstring).

    Args:
        gallery: a gallery with its pixels in memory.
        attribute: the label that is each image's concept (BiasWorld's ``activity``).
    """

    name = "concept_oracle"
    capabilities = frozenset({Capability.EMBED})

    def __init__(self, gallery: FaceGallery, attribute: str = "activity") -> None:
        super().__init__()
        if gallery.pixels is None or attribute not in gallery.values:
            raise ConfigError(
                f"Expected a gallery in memory that labels {attribute!r} but got {gallery.dataset}'s "
                f"({'no pixels' if gallery.pixels is None else ', '.join(gallery.values)})"
            )
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # gives the adapter a device
        self.concepts = tuple(str(value) for value in gallery.values[attribute])
        self.concept_of = {
            _key(picture): self.concepts.index(str(label))
            for picture, label in zip(gallery.pixels, gallery.labels[attribute], strict=True)
        }

    def _one_hot(self, indices: Sequence[int | None]) -> Tensor:
        vectors = torch.zeros(len(indices), len(self.concepts))  # (B, C)
        for row, index in enumerate(indices):
            if index is not None:
                vectors[row, index] = 1.0
        return vectors.to(self.device)

    def prepare_images(self, images: Tensor) -> Tensor:
        """Float images ``(B, 3, H, W)`` in [0, 1] -> the one-hot ``(B, C)`` of their concepts; an image not in the
        gallery is refused."""
        if not isinstance(images, Tensor):
            raise InputError(f"{self.name} embeds the pixels of its gallery only, not {type(images).__name__}")
        found = [self.concept_of.get(_key(picture.cpu())) for picture in images]
        if None in found:
            raise InputError(f"image {found.index(None)} of the batch is not in {self.name}'s gallery")
        return self._one_hot(found)

    def prepare_texts(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """Texts -> ``{"concepts": (B, C)}``, the one-hot of the one concept each names (zeros for none or several)."""
        named = []
        for text in texts:
            words = set(re.findall(r"[a-z_]+", text.lower()))
            hits = [i for i, concept in enumerate(self.concepts) if concept.lower() in words]
            named.append(hits[0] if len(hits) == 1 else None)
        return {"concepts": self._one_hot(named)}

    def embed_images(self, pixel_values: Tensor) -> Tensor:
        return F.normalize(pixel_values, dim=1)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        return F.normalize(tokens["concepts"], dim=1)

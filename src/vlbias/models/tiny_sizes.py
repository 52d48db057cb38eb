"""The sizes of the tiny random models, declared once.

A tiny model (``vlbias measure --tiny``, a training module's ``model: {tiny: true}``) takes its sizes as flat
options, ``--model_options '{hidden_size: 16}'`` or ``tiny_sizes: {image_size: 64, patch_size: 8}``; each is a
field of the family's sizes dataclass below, whose defaults the family sets in one line
(:attr:`~vlbias.models.base.ModelAdapter.tiny_sizes`, e.g. CLIP's ``TinyEmbeddingSizes(hidden_size=64, ...)``).
A family with sizes no other family has declares them in a subclass beside its adapter (ALBEF's fusion layers,
BERT's text length, the region models' feature width). :func:`~vlbias.models.registry.check_model_options`
refuses a name that is no size of the family (nor another option of its ``tiny``) before anything is built.
This module imports no torch, and takes no ``from __future__ import annotations``: the fields' types stay objects, so
a family's subclass in another module has them checked (:func:`vlbias.options.accepted_types`) without importing
their names.
"""

import dataclasses
from dataclasses import dataclass

from jsonargparse.typing import PositiveInt


@dataclass(frozen=True)
class TinySizes:
    """The sizes every tiny model has: the width and depth of its transformers (4 attention heads each, unless the
    family says otherwise).

    Args:
        hidden_size: width of every transformer layer (text, vision and fusion alike).
        num_layers: transformer layers of each stream (the family's docstring says which streams).
    """

    hidden_size: PositiveInt = 32
    num_layers: PositiveInt = 2

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The size names, in declaration order."""
        return tuple(field.name for field in dataclasses.fields(cls))


@dataclass(frozen=True)
class TinyImageSizes(TinySizes):
    """The sizes of a tiny model that reads pixels through a ViT (CLIP, BLIP, FLAVA, ViLT, ALBEF).

    Args:
        image_size: side of the square images the model reads, in pixels.
        patch_size: side of the ViT's square patches, in pixels (it divides ``image_size``).
    """

    image_size: PositiveInt = 32
    patch_size: PositiveInt = 8


@dataclass(frozen=True)
class TinyEmbeddingSizes(TinyImageSizes):
    """The sizes of a tiny model with a joint image-text embedding (CLIP, BLIP, FLAVA).

    Args:
        projection_dim: dimension of the image and text embeddings (the contrastive projections' output).
    """

    projection_dim: PositiveInt = 32


def split_sizes(sizes: TinySizes, options: dict) -> tuple[dict, dict]:
    """The options that are fields of ``sizes``, and the others.

    Example:
        >>> split_sizes(TinySizes(), {"hidden_size": 16, "seed": 3})
        ({'hidden_size': 16}, {'seed': 3})
    """
    names = sizes.names()
    return (
        {name: value for name, value in options.items() if name in names},
        {name: value for name, value in options.items() if name not in names},
    )

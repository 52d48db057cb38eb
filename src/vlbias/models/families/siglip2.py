"""SigLIP 2 NaFlex (Tschannen et al., 2025) through transformers' ``Siglip2Model``: SigLIP's sigmoid pair scores
(:class:`~vlbias.models.families.siglip.SigmoidPairScores`: EMBED, MATCH) over images read at their own aspect
ratio, as a variable number of patches. SigLIP 2's fixed-resolution checkpoints are ``SiglipModel`` s:
:mod:`vlbias.models.families.siglip`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor
from transformers import AutoTokenizer, Siglip2Config, Siglip2ImageProcessor, Siglip2Model
from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

from vlbias.data.images import load_image
from vlbias.errors import InputError
from vlbias.models.base import ImageInput, registered_capabilities
from vlbias.models.families.siglip import SIGLIP_MEAN, SIGLIP_STD, SigmoidPairScores, tiny_text_config
from vlbias.models.preprocess import checked_image_batch
from vlbias.models.pretrained import PretrainedAdapter, tiny_layers
from vlbias.models.tiny_sizes import TinyImageSizes

#: The tokenizer classes a SigLIP 2 checkpoint names, all read as transformers' ``Siglip2Tokenizer``.
SIGLIP2_TOKENIZERS = ("Gemma", "Siglip2")


@dataclass(frozen=True)
class PatchImages:
    """A batch of images cut into patches at their own aspect ratio, padded to one number of patches: what
    ``Siglip2ImageProcessor`` gives and ``Siglip2Model`` reads, and what :class:`SigLIP2Adapter` takes as
    ``pixel_values``. Indexing, ``index_select``, ``repeat_interleave`` and ``to`` act on the images (dimension 0) of
    all three, as they would on a ``(B, 3, H, W)`` tensor.

    Shapes::

        pixel_values          (B, N, 3 P P)  normalised patches, row by row; zeros at padding
        pixel_attention_mask  (B, N)         1 for a patch of the image, 0 for padding
        spatial_shapes        (B, 2)         the image's patch rows and columns (their product: its patches)
    """

    pixel_values: Tensor
    pixel_attention_mask: Tensor
    spatial_shapes: Tensor

    def __len__(self) -> int:
        return self.pixel_values.shape[0]

    def __getitem__(self, images) -> PatchImages:
        """The images ``images`` (a slice, an index tensor) of the batch."""
        return self._map(lambda tensor: tensor[images])

    def index_select(self, dim: int, index: Tensor) -> PatchImages:
        """The images ``index`` (``dim`` must be 0)."""
        return self._map(lambda tensor: tensor.index_select(self._images_dim(dim), index.to(tensor.device)))

    def repeat_interleave(self, repeats: int | Tensor, dim: int = 0) -> PatchImages:
        """Each image ``repeats`` times in a row (``dim`` must be 0)."""
        return self._map(lambda tensor: tensor.repeat_interleave(repeats, dim=self._images_dim(dim)))

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> PatchImages:
        """Move to ``device``; ``dtype`` casts the patches."""
        return PatchImages(
            self.pixel_values.to(device=device, dtype=dtype),
            self.pixel_attention_mask.to(device),
            self.spatial_shapes.to(device),
        )

    @property
    def device(self) -> torch.device:
        return self.pixel_values.device

    def _map(self, function) -> PatchImages:
        return PatchImages(*(function(tensor) for tensor in dataclasses.astuple(self)))

    @staticmethod
    def _images_dim(dim: int) -> int:
        if dim != 0:
            raise InputError(f"PatchImages select images (dim 0) only but got dim={dim}.")
        return 0


def _load_tokenizer(name_or_path: str | Path):
    """The tokenizer of ``name_or_path``. ``AutoTokenizer`` gives every ``siglip2`` model ``Siglip2Tokenizer`` (SigLIP
    2's checkpoints name Gemma's tokenizer, which transformers overrides), whatever ``tokenizer_config.json`` names;
    a local directory whose tokenizer is another one (a tiny model's word-level tokenizer) is read by the class it
    names, which would otherwise read its vocabulary with Gemma's rules."""
    config = Path(name_or_path) / "tokenizer_config.json"
    named = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class", "") if config.is_file() else ""
    tokenizer_class = tokenizer_class_from_name(named) if named and not named.startswith(SIGLIP2_TOKENIZERS) else None
    return (tokenizer_class or AutoTokenizer).from_pretrained(str(name_or_path))


class SigLIP2Adapter(SigmoidPairScores, PretrainedAdapter):
    """Normalised embeddings (EMBED) and sigmoid pair log-odds (MATCH) of a ``Siglip2Model``
    (:class:`~vlbias.models.families.siglip.SigmoidPairScores`).

    Images go through the checkpoint's ``Siglip2ImageProcessor`` (:attr:`processor`): each is resized, keeping its
    aspect ratio, to the largest multiple of the patch size that makes at most ``max_num_patches`` patches
    (bilinear), normalised with mean and std 0.5, cut into patches and padded (:class:`PatchImages`): PIL images and
    files exactly as the processor reads them, ``(B, 3, H, W)`` tensors in ``[0, 1]`` through the same steps.
    :meth:`from_pretrained` loads a hub id (``google/siglip2-base-patch16-naflex``) or a local ``save_pretrained``
    directory (weights, tokenizer and ``preprocessor_config.json``). The tiny model (:meth:`tiny`) has towers of
    :attr:`tiny_sizes`, a learnt position grid of ``(image_size / patch_size)`` squared patches, which is also its
    ``max_num_patches``, and reads 32 tokens.

    Example:
        >>> model = SigLIP2Adapter.tiny()
        >>> pixels = model.prepare_images(torch.rand(2, 3, 32, 96))
        >>> pixels.spatial_shapes.tolist(), pixels.pixel_attention_mask.sum(dim=1).tolist()
        ([[2, 6], [2, 6]], [12, 12])
        >>> model.match_logits(pixels, model.prepare_texts(["a man is cooking.", "a woman is driving."])).shape
        torch.Size([2])
    """

    name = "siglip2"
    capabilities = registered_capabilities(name)
    model_class: ClassVar = Siglip2Model
    tiny_sizes = TinyImageSizes()

    def __init__(self, model: Siglip2Model, tokenizer, processor: Siglip2ImageProcessor) -> None:
        super().__init__(model, tokenizer)
        self.processor = processor

    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> PatchImages:
        """The processor's patches of PIL images or paths (as it reads them), or of a ``(B, 3, H, W)`` tensor in
        ``[0, 1]`` (read without its rescaling from 0-255)."""
        if isinstance(images, Tensor):
            batch = self.processor(images=list(checked_image_batch(images)), do_rescale=False, return_tensors="pt")
        else:
            batch = self.processor(images=[load_image(image) for image in images], return_tensors="pt")
        return PatchImages(**{field.name: batch[field.name] for field in dataclasses.fields(PatchImages)}).to(
            self.device
        )

    def _image_inputs(self, pixel_values: PatchImages) -> dict[str, Tensor]:
        return {field.name: getattr(pixel_values, field.name) for field in dataclasses.fields(PatchImages)}

    def save_pretrained(self, directory: str | Path) -> None:
        """Write weights, config, tokenizer and the processor's ``preprocessor_config.json`` to ``directory``."""
        super().save_pretrained(directory)
        self.processor.save_pretrained(directory)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> SigLIP2Adapter:
        """Load a hub id or a local ``save_pretrained`` directory: weights (keys checked strictly), tokenizer and
        image processor."""
        model = cls._load_model(name_or_path)
        processor = Siglip2ImageProcessor.from_pretrained(str(name_or_path))
        return cls(model, _load_tokenizer(name_or_path), processor)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyImageSizes) -> SigLIP2Adapter:
        """A small random ``Siglip2Model``: towers of ``num_layers`` layers (feed-forward 2 x hidden)."""
        patches = (sizes.image_size // sizes.patch_size) ** 2
        config = Siglip2Config(
            text_config=tiny_text_config(tokenizer, sizes),
            vision_config=dict(
                **tiny_layers(sizes, intermediate_size=2 * sizes.hidden_size),
                num_patches=patches,
                patch_size=sizes.patch_size,
            ),
        )
        processor = Siglip2ImageProcessor(
            patch_size=sizes.patch_size, max_num_patches=patches, image_mean=SIGLIP_MEAN, image_std=SIGLIP_STD
        )
        return cls(Siglip2Model(config), tokenizer, processor)

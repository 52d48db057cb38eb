"""CLIP (Radford et al., 2021) through transformers' ``CLIPModel``: a dual encoder (EMBED)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import CLIPConfig, CLIPModel

from vlbias.models.base import Capability
from vlbias.models.preprocess import ImageTransform
from vlbias.models.pretrained import ImageTextAdapter, tiny_layers, tiny_vocabulary_ids
from vlbias.models.vocab import tiny_tokenizer


class CLIPAdapter(ImageTextAdapter):
    """Normalised image and text embeddings from a ``CLIPModel``.

    The text tower pools at the tokenizer's end-of-text token, so any tokenizer works as long as
    ``text_config.eos_token_id`` names its end token (set by :meth:`tiny` from the tokenizer).
    "No image" is not defined for a dual encoder; EMBED never needs one. :meth:`from_pretrained` loads a hub id
    or a local ``save_pretrained`` directory (weights, tokenizer and ``preprocessor_config.json``; missing
    preprocessing fields take CLIP's defaults).

    Example:
        >>> model = CLIPAdapter.tiny()
        >>> model.embed_texts(model.prepare_texts(["a man is cooking"])).shape
        torch.Size([1, 64])
    """

    name = "clip"
    capabilities = frozenset({Capability.EMBED})
    model_class = CLIPModel
    size_key = "crop_size"

    def embed_images(self, pixel_values: Tensor) -> Tensor:
        features = self.model.get_image_features(pixel_values=pixel_values).pooler_output
        return F.normalize(features, dim=-1)  # (B, D)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        features = self.model.get_text_features(
            input_ids=tokens["input_ids"], attention_mask=tokens.get("attention_mask")
        ).pooler_output
        return F.normalize(features, dim=-1)  # (B, D)

    def direct_call(
        self, capability: Capability, pixel_values: Tensor, tokens: dict[str, Tensor]
    ) -> tuple[Tensor, Tensor]:
        """``CLIPModel.forward``'s ``image_embeds`` and ``text_embeds`` (already normalised) for EMBED."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        out = self.model(
            input_ids=tokens["input_ids"], pixel_values=pixel_values, attention_mask=tokens.get("attention_mask")
        )
        return out.image_embeds, out.text_embeds

    @property
    def logit_scale(self) -> Tensor:
        return self.model.logit_scale

    @classmethod
    def tiny(
        cls,
        seed: int = 0,
        tokenizer: object | None = None,
        hidden_size: int = 64,
        num_layers: int = 2,
        image_size: int = 64,
        patch_size: int = 8,
        projection_dim: int = 64,
    ) -> CLIPAdapter:
        """A small random CLIP (``tiny_tokenizer()`` unless ``tokenizer`` is given)."""
        tokenizer = tiny_tokenizer(tokenizer)
        layers = tiny_layers(hidden_size, num_layers, intermediate_size=2 * hidden_size)
        config = CLIPConfig(
            text_config=dict(
                **layers, **tiny_vocabulary_ids(tokenizer, start_and_end=True), max_position_embeddings=32
            ),
            vision_config=dict(**layers, image_size=image_size, patch_size=patch_size),
            projection_dim=projection_dim,
        )
        torch.manual_seed(seed)
        return cls(CLIPModel(config), tokenizer, ImageTransform(image_size=image_size))

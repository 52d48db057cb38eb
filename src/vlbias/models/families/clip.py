"""CLIP (Radford et al., 2021) through transformers' ``CLIPModel``: a dual encoder (EMBED)."""

from __future__ import annotations

import copy
from pathlib import Path

import torch.nn.functional as F
from torch import Tensor
from transformers import CLIPConfig, CLIPModel

from vlbias.models.base import Capability, registered_capabilities
from vlbias.models.linear_export import checked_linear_maps, folded_linear
from vlbias.models.preprocess import ImageTransform
from vlbias.models.pretrained import ImageTextAdapter, tiny_layers, tiny_vocabulary_ids
from vlbias.models.tiny_sizes import TinyEmbeddingSizes


class CLIPAdapter(ImageTextAdapter):
    """Normalised image and text embeddings from a ``CLIPModel``.

    The text tower pools at the tokenizer's end-of-text token, so any tokenizer works as long as
    ``text_config.eos_token_id`` names its end token (set by :meth:`tiny` from the tokenizer).
    "No image" is not defined for a dual encoder; EMBED never needs one. :meth:`from_pretrained` loads a hub id
    or a local ``save_pretrained`` directory (weights, tokenizer and ``preprocessor_config.json``; missing
    preprocessing fields take CLIP's defaults). The tiny CLIP (:meth:`tiny`) is wider than the other tiny models:
    64 wide, on 64-pixel images, with 64-d embeddings (:attr:`tiny_sizes`).

    Example:
        >>> model = CLIPAdapter.tiny()
        >>> model.embed_texts(model.prepare_texts(["a man is cooking"])).shape
        torch.Size([1, 64])
    """

    name = "clip"
    capabilities = registered_capabilities(name)
    model_class = CLIPModel
    size_key = "crop_size"
    tiny_sizes = TinyEmbeddingSizes(hidden_size=64, image_size=64, projection_dim=64)
    no_linear_export = None

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

    def export_linear(self, image_map: Tensor | None, text_map: Tensor | None, out_dir: str | Path) -> Path:
        """A standard ``transformers.CLIPModel`` directory whose ``visual_projection`` and ``text_projection`` are
        :math:`M W` (:mod:`vlbias.models.linear_export`), with ``config.projection_dim`` the maps' output dimension;
        CLIP normalises its embeddings, so ``CLIPModel.from_pretrained(out_dir)`` gives :math:`M z / |M z|`. Tokenizer
        and preprocessing are written too, so ``vlbias.models.registry.load("clip", checkpoint=out_dir)`` loads it as
        well. The logit scale is copied unchanged. This adapter's model is left as it is."""
        model = copy.deepcopy(self.model)
        maps = checked_linear_maps(image_map, text_map, model.config.projection_dim)
        for attribute, matrix in zip(("visual_projection", "text_projection"), maps):
            setattr(model, attribute, folded_linear(getattr(model, attribute), matrix))
        model.config.projection_dim = maps[0].shape[0]
        out_dir = Path(out_dir)
        CLIPAdapter(model, self.tokenizer, self.transform).save_pretrained(out_dir)
        return out_dir

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyEmbeddingSizes) -> CLIPAdapter:
        """A small random CLIP: text and vision towers of ``num_layers`` layers (feed-forward 2 x hidden)."""
        layers = tiny_layers(sizes, intermediate_size=2 * sizes.hidden_size)
        config = CLIPConfig(
            text_config=dict(
                **layers, **tiny_vocabulary_ids(tokenizer, start_and_end=True), max_position_embeddings=32
            ),
            vision_config=dict(**layers, image_size=sizes.image_size, patch_size=sizes.patch_size),
            projection_dim=sizes.projection_dim,
        )
        return cls(CLIPModel(config), tokenizer, ImageTransform(image_size=sizes.image_size))

"""SigLIP (Zhai et al., 2023) through transformers' ``SiglipModel``: a dual encoder trained with the sigmoid loss,
whose pairs get a sigmoid score (EMBED, MATCH). SigLIP 2's fixed-resolution checkpoints (``google/siglip2-*-224`` and
the like, ``model_type`` ``siglip``) load here too; its NaFlex checkpoints are :mod:`vlbias.models.families.siglip2`'s.

:class:`SigmoidPairScores` is what the two families share: the text read padded to the model's full length, the
pair score, and the direct call.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import SiglipConfig, SiglipModel

from vlbias.models.base import Capability, ModelAdapter, registered_capabilities
from vlbias.models.linear_export import checked_linear_maps, folded_linear
from vlbias.models.preprocess import PREPROCESSOR_FILE, ImageTransform
from vlbias.models.pretrained import ImageTextAdapter, tiny_layers, tiny_vocabulary_ids
from vlbias.models.tiny_sizes import TinyImageSizes

#: The text length of the tiny SigLIP models (SigLIP's real ones read 64 tokens).
TINY_TEXT_LENGTH = 32
SIGLIP_MEAN = SIGLIP_STD = (0.5, 0.5, 0.5)


class SigmoidPairScores(ModelAdapter):
    """Text, embeddings and pair scores of a SigLIP-style ``transformers`` model (``self.model``: ``get_text_features``,
    ``get_image_features``, ``logit_scale``, ``logit_bias``).

    **Text**: SigLIP was trained on texts padded to the text tower's full length (64 tokens), read without an attention
    mask, and pools its last position; :meth:`prepare_texts` pads every text to :attr:`max_text_length` with the
    tokenizer's pad token (longer ones are cut, with a warning) and gives ``input_ids`` alone, as the SigLIP papers'
    code reads them, so a text's embedding does not depend on the other texts of its batch.

    **Scores**: EMBED is the normalised ``get_image_features`` / ``get_text_features``. MATCH is the model's own pair
    logit, :math:`s(v, t) = e^{\\tau}\\cos(v, t) + b` with its learnt ``logit_scale`` :math:`\\tau` and ``logit_bias``
    :math:`b` (Zhai et al., 2023, Eq. 1 and Algorithm 1): the sigmoid loss trains :math:`\\sigma(s)` as the
    probability that the pair matches, so :math:`s` is a log-odds like the ITM heads' and ``sigmoid(match_logits)`` is
    the model's match probability. The subclass says how its prepared images enter the vision model
    (:meth:`_image_inputs`).
    """

    match_follows_embeddings = True  # e^tau cos + b
    match_score = "sigmoid"
    no_linear_export = None  # of the text embeddings only (export_linear)
    no_linear_export_of = {
        "image": "the image tower ends in an attention-pooling head whose MLP is added back to the pooled state (no "
        "linear map to the embedding), so there are no projection weights to fold the change into"
    }

    def prepare_texts(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """``{"input_ids": (B, max_text_length)}``: the tokenizer's ids padded to the full length (class docstring)."""
        input_ids = super().prepare_texts(texts)["input_ids"]  # padded to the longest, cut with a warning
        pad = self.max_text_length - input_ids.shape[1]
        side = (0, pad) if self.tokenizer.padding_side == "right" else (pad, 0)
        return {"input_ids": F.pad(input_ids, side, value=self.tokenizer.pad_token_id)}

    def _image_inputs(self, pixel_values) -> dict[str, Tensor]:
        """The vision model's keyword inputs of prepared images."""
        raise NotImplementedError

    def embed_images(self, pixel_values) -> Tensor:
        features = self.model.get_image_features(**self._image_inputs(pixel_values)).pooler_output
        return F.normalize(features, dim=-1)  # (B, D)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        features = self.model.get_text_features(input_ids=tokens["input_ids"]).pooler_output
        return F.normalize(features, dim=-1)  # (B, D)

    def match_logits(self, pixel_values, tokens: dict[str, Tensor]) -> Tensor:
        """:math:`e^{\\tau}\\cos(v_b, t_b) + b` of each pair ``(B,)``: the log-odds that image b and text b match."""
        cosines = (self.embed_images(pixel_values) * self.embed_texts(tokens)).sum(dim=-1)  # (B,)
        return self.model.logit_scale.exp() * cosines + self.model.logit_bias

    def direct_call(
        self, capability: Capability, pixel_values, tokens: dict[str, Tensor]
    ) -> Tensor | tuple[Tensor, Tensor]:
        """The model's ``forward``: its ``image_embeds`` and ``text_embeds`` (normalised) for EMBED, the diagonal of
        its ``logits_per_image`` for MATCH."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        out = self.model(input_ids=tokens["input_ids"], **self._image_inputs(pixel_values))
        if capability is Capability.MATCH:
            return out.logits_per_image.diagonal()
        return out.image_embeds, out.text_embeds

    def export_linear(self, image_map: Tensor | None, text_map: Tensor | None, out_dir: str | Path) -> Path:
        """This model with the linear change :math:`M` of its text embeddings folded into the text tower's ``head``
        (:math:`W' = M W`, :math:`b' = M b`: :mod:`vlbias.models.linear_export`), written by :meth:`save_pretrained`,
        so the family's ``from_pretrained`` gives :math:`M t / |M t|` with no vlbias code. The image tower has no
        linear map to fold into (:attr:`no_linear_export_of`): ``image_map`` must be ``None`` or the identity, so
        :math:`M` is square. The logit scale and bias are copied unchanged. This adapter's model is left as it is."""
        dim = self.model.text_model.head.out_features
        maps = dict(zip(("image", "text"), checked_linear_maps(image_map, text_map, dim)))
        identity = torch.eye(dim, dtype=torch.float64)
        self.check_linear_export([modality for modality, matrix in maps.items() if not torch.equal(matrix, identity)])
        exported = copy.deepcopy(self)
        exported.model.text_model.head = folded_linear(exported.model.text_model.head, maps["text"])
        out_dir = Path(out_dir)
        exported.save_pretrained(out_dir)
        return out_dir

    @property
    def logit_scale(self) -> Tensor:
        return self.model.logit_scale

    @property
    def logit_bias(self) -> Tensor:
        return self.model.logit_bias


class SigLIPAdapter(SigmoidPairScores, ImageTextAdapter):
    """Normalised embeddings (EMBED) and sigmoid pair log-odds (MATCH) of a ``SiglipModel``
    (:class:`SigmoidPairScores`).

    Images are resized straight to the model's square (bicubic, no crop) and normalised with mean and std 0.5, as
    ``SiglipImageProcessor`` does. :meth:`from_pretrained` loads a hub id (``google/siglip-base-patch16-224``,
    ``google/siglip2-base-patch16-224``) or a local ``save_pretrained`` directory (weights, tokenizer and
    ``preprocessor_config.json``). The tiny model (:meth:`tiny`) has towers of :attr:`tiny_sizes` (embeddings as wide
    as the towers, SigLIP's attention-pooling head on the image tower) and reads :data:`TINY_TEXT_LENGTH` tokens.

    Example:
        >>> import torch
        >>> model = SigLIPAdapter.tiny()
        >>> pixels = model.prepare_images(torch.rand(2, 3, 64, 64))
        >>> tokens = model.prepare_texts(["a man is cooking.", "a woman is driving."])
        >>> tokens["input_ids"].shape, model.match_logits(pixels, tokens).shape
        (torch.Size([2, 32]), torch.Size([2]))
    """

    name = "siglip"
    capabilities = registered_capabilities(name)
    model_class: ClassVar = SiglipModel
    size_key = "size"
    center_crop = False
    tiny_sizes = TinyImageSizes()

    def _image_inputs(self, pixel_values: Tensor) -> dict[str, Tensor]:
        return {"pixel_values": pixel_values}

    @classmethod
    def _load_transform(cls, name_or_path: str | Path, model: SiglipModel) -> ImageTransform:
        """The transform of ``name_or_path``'s ``preprocessor_config.json``; without a local one (a hub id), the
        vision config's image size and SigLIP's mean and std (0.5, which every SigLIP checkpoint uses)."""
        transform = super()._load_transform(name_or_path, model)
        if (Path(name_or_path) / PREPROCESSOR_FILE).is_file():
            return transform
        return replace(transform, mean=SIGLIP_MEAN, std=SIGLIP_STD)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyImageSizes) -> SigLIPAdapter:
        """A small random ``SiglipModel``: towers of ``num_layers`` layers (feed-forward 2 x hidden)."""
        config = SiglipConfig(
            text_config=tiny_text_config(tokenizer, sizes),
            vision_config=dict(
                **tiny_layers(sizes, intermediate_size=2 * sizes.hidden_size),
                image_size=sizes.image_size,
                patch_size=sizes.patch_size,
            ),
        )
        transform = ImageTransform(sizes.image_size, SIGLIP_MEAN, SIGLIP_STD, center_crop=cls.center_crop)
        return cls(SiglipModel(config), tokenizer, transform)


def tiny_text_config(tokenizer, sizes: TinyImageSizes) -> dict:
    """The text tower of a tiny SigLIP over ``tokenizer``'s vocabulary: ``hidden_size`` wide, ``num_layers`` deep,
    :data:`TINY_TEXT_LENGTH` positions."""
    return dict(
        **tiny_layers(sizes, intermediate_size=2 * sizes.hidden_size),
        **tiny_vocabulary_ids(tokenizer, start_and_end=True),
        max_position_embeddings=TINY_TEXT_LENGTH,
    )

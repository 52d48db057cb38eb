"""LXMERT (Tan and Bansal, 2019) through transformers' ``LxmertForPreTraining``: a language
encoder, an object-relationship encoder over regions with their boxes, and a cross-modality
encoder (FILL_MASK, MATCH, TOKEN_STATES).
"""

from __future__ import annotations

from torch import Tensor
from transformers import LxmertConfig, LxmertForPreTraining

from vlbias.models.base import Capability, registered_capabilities
from vlbias.models.region_adapter import RegionAdapter, TinyRegionSizes
from vlbias.models.regions import RegionFeatures


class LXMERTAdapter(RegionAdapter):
    """MLM logits, an image-text matching logit and language-stream states from LXMERT.

    ``pixel_values`` is a :class:`~vlbias.models.regions.RegionFeatures` batch (from
    :meth:`prepare_images`): LXMERT reads the region features (``visual_feats``), their boxes
    normalised to ``[0, 1]`` (``visual_pos``) and the region mask.

    * FILL_MASK: the MLM head's logits over the language output, ``(B, T, V)``.
    * MATCH: the ``cross_relationship_score`` head was trained with label 1 for a caption that
      matches the image and 0 otherwise, so the match logit is
      ``s_1 - s_0 = log p(match) - log p(mismatch)``, ``(B,)``.
    * TOKEN_STATES: the language output of the cross-modality encoder, ``(B, T, H)``
      (Ross et al., 2021, Sec. 4: "for two-stream models ... the outputs of the language
      Transformer").
    * No image: LXMERT always needs regions, so "no image" is one region covering the whole
      image with an all-zero feature -- how LXMERT's pre-training presents a masked region
      (:meth:`RegionFeatures.blank`).

    Example:
        >>> model = LXMERTAdapter.tiny()
        >>> tokens = model.prepare_texts(["the man is [MASK]."])
        >>> model.fill_mask_logits(model.no_image(1), tokens).shape[:2]
        torch.Size([1, 7])
    """

    name = "lxmert"
    capabilities = registered_capabilities(name)
    model_class = LxmertForPreTraining
    visual_dim_field = "visual_feat_dim"

    def no_image(self, batch_size: int) -> RegionFeatures:
        return RegionFeatures.blank(batch_size, self.visual_dim).to(self.device, self.model.dtype)

    def _inputs(self, regions: RegionFeatures, tokens: dict[str, Tensor]) -> dict[str, Tensor]:
        self._one_image_per_text(regions, tokens)
        return dict(
            **self._text_inputs(tokens),
            visual_feats=regions.features,
            visual_pos=regions.boxes,
            visual_attention_mask=regions.mask,
        )

    def fill_mask_logits(self, pixel_values: RegionFeatures, tokens: dict[str, Tensor]) -> Tensor:
        return self.model(**self._inputs(pixel_values, tokens)).prediction_logits  # (B, T, V)

    def match_logits(self, pixel_values: RegionFeatures, tokens: dict[str, Tensor]) -> Tensor:
        scores = self.model(**self._inputs(pixel_values, tokens)).cross_relationship_score
        return scores[:, 1] - scores[:, 0]  # (B,) label 1 = "matches"

    def token_states(self, pixel_values: RegionFeatures, tokens: dict[str, Tensor]) -> Tensor:
        return self.model.lxmert(**self._inputs(pixel_values, tokens)).language_output  # (B, T, H)

    def direct_call(self, capability: Capability, pixel_values: RegionFeatures, tokens: dict[str, Tensor]) -> Tensor:
        """``LxmertForPreTraining`` called as in its documentation, language states read from
        ``output_hidden_states``."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        output = self.model(
            input_ids=tokens["input_ids"],
            attention_mask=tokens["attention_mask"],
            visual_feats=pixel_values.features,
            visual_pos=pixel_values.boxes,
            visual_attention_mask=pixel_values.mask,
            output_hidden_states=True,
        )
        if capability is Capability.FILL_MASK:
            return output.prediction_logits
        if capability is Capability.MATCH:
            return output.cross_relationship_score[:, 1] - output.cross_relationship_score[:, 0]
        return output.language_hidden_states[-1]

    @classmethod
    def _tiny_config(cls, tokenizer, sizes: TinyRegionSizes) -> LxmertConfig:
        """``num_layers`` language, cross-modality and object-relationship layers each. The unused pre-training
        heads (object, attribute and answer prediction) are kept, with a few classes each, so the module tree is
        the real one."""
        return LxmertConfig(
            vocab_size=len(tokenizer),
            hidden_size=sizes.hidden_size,
            num_attention_heads=4,
            intermediate_size=37,
            l_layers=sizes.num_layers,
            x_layers=sizes.num_layers,
            r_layers=sizes.num_layers,
            max_position_embeddings=64,
            visual_feat_dim=sizes.visual_dim,
            num_qa_labels=3,
            num_object_labels=5,
            num_attr_labels=4,
        )

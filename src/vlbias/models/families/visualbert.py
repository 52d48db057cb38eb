"""VisualBERT (Li et al., 2019) through transformers' ``VisualBertForPreTraining``: one
BERT stream over ``[CLS] text [SEP]`` followed by image regions (FILL_MASK, MATCH, TOKEN_STATES).
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers import VisualBertConfig, VisualBertForPreTraining

from vlbias.models.base import Capability, registered_capabilities
from vlbias.models.pretrained import tiny_layers, tiny_vocabulary_ids
from vlbias.models.region_adapter import RegionAdapter, TinyRegionSizes
from vlbias.models.regions import RegionFeatures


class VisualBERTAdapter(RegionAdapter):
    """MLM logits, an image-text matching logit and text-token states from VisualBERT.

    ``pixel_values`` is a :class:`~vlbias.models.regions.RegionFeatures` batch (from
    :meth:`prepare_images`); VisualBERT reads only the region features and their mask, never
    the boxes (every region gets visual position 0 and visual token type 1, as the authors do).

    * FILL_MASK: the MLM head's logits at the text positions, ``(B, T, V)``.
    * MATCH: the "sentence-image prediction" head was trained with label 0 for a caption that
      matches the image and 1 for a random caption, so the match logit is
      ``s_0 - s_1 = log p(match) - log p(random)``, ``(B,)``.
    * TOKEN_STATES: the last layer's hidden states at the text positions, ``(B, T, H)``
      (Ross et al., 2021, Sec. 4: "the hidden states corresponding to the language token inputs").
    * No image: text alone (``no_image`` returns ``None``; the model then sees no region).

    Example:
        >>> model = VisualBERTAdapter.tiny()
        >>> tokens = model.prepare_texts(["the man is [MASK]."])
        >>> model.fill_mask_logits(model.no_image(1), tokens).shape[:2]
        torch.Size([1, 7])
    """

    name = "visualbert"
    capabilities = registered_capabilities(name)
    model_class = VisualBertForPreTraining
    visual_dim_field = "visual_embedding_dim"

    def _visual_inputs(self, regions: RegionFeatures | None, tokens: dict[str, Tensor]) -> dict[str, Tensor]:
        self._one_image_per_text(regions, tokens)
        if regions is None:
            return {}
        return dict(
            visual_embeds=regions.features,
            visual_attention_mask=regions.mask,
            visual_token_type_ids=torch.ones_like(regions.mask),
        )

    def fill_mask_logits(self, pixel_values: RegionFeatures | None, tokens: dict[str, Tensor]) -> Tensor:
        output = self.model(**self._text_inputs(tokens), **self._visual_inputs(pixel_values, tokens))
        return output.prediction_logits[:, : tokens["input_ids"].shape[1]]  # (B, T, V)

    def match_logits(self, pixel_values: RegionFeatures, tokens: dict[str, Tensor]) -> Tensor:
        scores = self.model(
            **self._text_inputs(tokens), **self._visual_inputs(pixel_values, tokens)
        ).seq_relationship_logits
        return scores[:, 0] - scores[:, 1]  # (B,) label 0 = "matches"

    def token_states(self, pixel_values: RegionFeatures | None, tokens: dict[str, Tensor]) -> Tensor:
        states = self.model.visual_bert(
            **self._text_inputs(tokens), **self._visual_inputs(pixel_values, tokens)
        ).last_hidden_state
        return states[:, : tokens["input_ids"].shape[1]]  # (B, T, H)

    def direct_call(
        self, capability: Capability, pixel_values: RegionFeatures | None, tokens: dict[str, Tensor]
    ) -> Tensor:
        """``VisualBertForPreTraining`` called as in its documentation (visual token types 1,
        visual attention mask given), hidden states read from ``output_hidden_states``."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        inputs = dict(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"])
        if pixel_values is not None:
            inputs.update(
                visual_embeds=pixel_values.features,
                visual_token_type_ids=torch.ones(
                    pixel_values.features.shape[:-1], dtype=torch.long, device=self.device
                ),
                visual_attention_mask=pixel_values.mask,
            )
        output = self.model(**inputs, output_hidden_states=True)
        text_length = tokens["input_ids"].shape[1]
        if capability is Capability.FILL_MASK:
            return output.prediction_logits[:, :text_length]
        if capability is Capability.MATCH:
            return output.seq_relationship_logits[:, 0] - output.seq_relationship_logits[:, 1]
        return output.hidden_states[-1][:, :text_length]

    @classmethod
    def _tiny_config(cls, tokenizer, sizes: TinyRegionSizes) -> VisualBertConfig:
        """One BERT stream of ``num_layers`` layers."""
        return VisualBertConfig(
            **tiny_layers(sizes, intermediate_size=37),
            **tiny_vocabulary_ids(tokenizer),
            max_position_embeddings=64,
            visual_embedding_dim=sizes.visual_dim,
        )

"""BLIP (Li et al., 2022) through transformers' ``BlipForImageTextRetrieval``: EMBED from the
image-text contrastive (ITC) projections, MATCH from the image-text matching (ITM) head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import BlipConfig, BlipForImageTextRetrieval

from vlbias.models.base import Capability, pair_batches, patch_tokens, registered_capabilities
from vlbias.models.preprocess import ImageTransform
from vlbias.models.pretrained import ImageTextAdapter, tiny_layers, tiny_vocabulary_ids
from vlbias.models.tiny_sizes import TinyEmbeddingSizes


class BLIPAdapter(ImageTextAdapter):
    """ITC embeddings and ITM logits of a ``BlipForImageTextRetrieval``.

    EMBED: the unimodal encoders' first-token states through ``vision_proj``/``text_proj``,
    L2-normalised (BLIP's ITC features; their dot product is the model's own
    ``use_itm_head=False`` score). MATCH: the ITM head on the first token of the text encoder
    run with cross-attention to the image; the logit is the log-odds of the "match" class,
    ``itm[:, 1] - itm[:, 0]``, so ``sigmoid(logit)`` is the model's match probability.

    The text is encoded as the tokenizer gives it (first token ``[CLS]``), as transformers'
    ``BlipProcessor`` does for this model. "No image" (:meth:`no_image`) is the all-zero
    normalised image, i.e. a uniform picture of the normalisation mean colour: the ITM head
    needs some image to attend to.

    Images are resized straight to ``image_size`` x ``image_size`` (bicubic, no crop) and
    normalised with CLIP's mean and std, as ``BlipImageProcessor`` does. :meth:`from_pretrained` loads a hub id
    (e.g. ``Salesforce/blip-itm-base-coco``) or a local ``save_pretrained`` directory (weights, tokenizer and
    ``preprocessor_config.json``; missing preprocessing fields take BLIP's defaults: the vision config's image
    size, CLIP's mean and std).

    Example:
        >>> model = BLIPAdapter.tiny()
        >>> pixels = model.prepare_images(torch.rand(2, 3, 64, 64))
        >>> tokens = model.prepare_texts(["a man is cooking.", "a woman is driving."])
        >>> model.embed_images(pixels).shape, model.match_logits(pixels, tokens).shape
        (torch.Size([2, 32]), torch.Size([2]))
    """

    name = "blip"
    capabilities = registered_capabilities(name)
    model_class = BlipForImageTextRetrieval
    size_key = "size"
    center_crop = False
    tiny_sizes = TinyEmbeddingSizes()
    # The vision model's states that paired_match_logits holds at once (images are processed in chunks that
    # fit): 1 GiB is about 600 base-size images at 384 px (577 tokens, width 768).
    image_states_cache_bytes: int = 1 << 30

    def no_image(self, batch_size: int) -> Tensor:
        """``(batch_size, 3, S, S)`` zeros: the normalisation mean colour everywhere."""
        size = self.transform.image_size
        return torch.zeros(batch_size, 3, size, size, device=self.device)

    def embed_images(self, pixel_values: Tensor) -> Tensor:
        return self.embed_image_states(self.image_states(pixel_values))  # (B, D)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        text_states = self.model.text_encoder(
            input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"]
        ).last_hidden_state  # (B, T, Dt)
        return F.normalize(self.model.text_proj(text_states[:, 0]), dim=-1)  # (B, D)

    def match_logits(self, pixel_values: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        return self._match_image_states(self.image_states(pixel_values), tokens["input_ids"], tokens["attention_mask"])

    def image_states(self, pixel_values: Tensor) -> Tensor:
        """The vision model's last states ``(B, 1 + N, Dv)``: what the projection and the ITM text encoder read."""
        return self.model.vision_model(pixel_values=pixel_values).last_hidden_state

    def embed_image_states(self, image_states: Tensor) -> Tensor:
        return F.normalize(self.model.vision_proj(image_states[:, 0]), dim=-1)  # (B, D)

    def match_logits_of_states(
        self, image_states: Tensor, text_states: dict[str, Tensor], image_rows: Tensor, text_rows: Tensor
    ) -> Tensor:
        """Match logits ``(R,)`` of pairs (see the base class): the text encoder, which cross-attends to the image in
        every layer, once per pair, on the vision model's states of each image computed once. ``text_states``:
        the tokens (:meth:`text_states` is the base class's; no text pass precedes the cross-attention)."""
        return self._match_image_states(
            image_states.index_select(0, image_rows),
            text_states["input_ids"].index_select(0, text_rows),
            text_states["attention_mask"].index_select(0, text_rows),
        )

    def paired_match_logits(
        self, pixel_values: Tensor, tokens: dict[str, Tensor], image_rows: Tensor, text_rows: Tensor, batch_size: int
    ) -> Tensor:
        """Match logits ``(R,)`` of image-text pairs (see the base class): every image through the vision model
        once, for at most :attr:`image_states_cache_bytes` of image states at a time; per pair, the text encoder
        (which cross-attends to the image in every layer) and the ITM head, in batches of ``batch_size`` pairs of
        captions of similar length, each batch cut to its longest caption (padding is masked). Equal to
        :meth:`match_logits` of the gathered pairs up to float rounding."""
        vision = self.model.config.vision_config
        per_image = patch_tokens(pixel_values, vision.patch_size) * vision.hidden_size * pixel_values.element_size()
        chunk = max(1, self.image_states_cache_bytes // per_image)
        input_ids, mask = tokens["input_ids"], tokens["attention_mask"]
        lengths = mask.sum(dim=1)
        logits = torch.empty(image_rows.numel(), device=pixel_values.device)
        for first, stop, batches in pair_batches(image_rows, text_rows, lengths, chunk, len(pixel_values), batch_size):
            images = torch.cat(
                [self.image_states(p) for p in pixel_values[first:stop].split(batch_size)]
            )  # (chunk, 1+N, Dv)
            for batch in batches:
                rows = text_rows[batch]
                longest = int(lengths[rows].max())
                logits[batch] = self._match_image_states(
                    images.index_select(0, image_rows[batch] - first),
                    input_ids[:, :longest].index_select(0, rows),
                    mask[:, :longest].index_select(0, rows),
                )
        return logits

    def _match_image_states(self, image_states: Tensor, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """``itm[:, 1] - itm[:, 0]`` ``(B,)`` of texts read with the vision model's states ``(B, 1+N, Dv)``."""
        image_mask = torch.ones(image_states.shape[:-1], dtype=torch.long, device=image_states.device)
        fused = self.model.text_encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=image_states,
            encoder_attention_mask=image_mask,
        ).last_hidden_state  # (B, T, Dt)
        itm = self.model.itm_head(fused[:, 0])  # (B, 2): (no match, match)
        return itm[:, 1] - itm[:, 0]  # (B,)

    def direct_call(
        self, capability: Capability, pixel_values: Tensor, tokens: dict[str, Tensor]
    ) -> Tensor | tuple[Tensor, Tensor]:
        """``BlipForImageTextRetrieval.forward``: with ``use_itm_head=False`` its unimodal outputs
        through the projections for EMBED; with ``use_itm_head=True`` the ITM log-odds for MATCH."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        use_itm_head = capability is Capability.MATCH
        out = self.model(
            input_ids=tokens["input_ids"],
            pixel_values=pixel_values,
            attention_mask=tokens["attention_mask"],
            use_itm_head=use_itm_head,
        )
        if use_itm_head:
            return out.itm_score[:, 1] - out.itm_score[:, 0]
        image = F.normalize(self.model.vision_proj(out.last_hidden_state[:, 0]), dim=-1)
        text = F.normalize(self.model.text_proj(out.question_embeds[:, 0]), dim=-1)
        return image, text

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyEmbeddingSizes) -> BLIPAdapter:
        """A small random BLIP: vision and text encoders of ``num_layers`` layers (feed-forward 2 x hidden)."""
        layers = tiny_layers(sizes, intermediate_size=2 * sizes.hidden_size)
        config = BlipConfig(
            text_config=dict(
                **layers,
                **tiny_vocabulary_ids(tokenizer, start_and_end=True),
                sep_token_id=tokenizer.sep_token_id,
                encoder_hidden_size=sizes.hidden_size,
                max_position_embeddings=64,
            ),
            vision_config=dict(
                **layers, image_size=sizes.image_size, patch_size=sizes.patch_size, initializer_range=0.02
            ),
            image_text_hidden_size=sizes.projection_dim,
        )
        transform = ImageTransform(image_size=sizes.image_size, center_crop=cls.center_crop)
        return cls(BlipForImageTextRetrieval(config), tokenizer, transform)

"""FLAVA (Singh et al., 2022) through transformers' ``FlavaForPreTraining``: unimodal image and
text encoders, a multimodal encoder over both, and the pretraining heads (EMBED, MATCH,
FILL_MASK, TOKEN_STATES).

Which part of FLAVA serves each capability:

* EMBED: the contrastive embeddings, ``normalize(image_projection(h_img[:, 0]))`` and
  ``normalize(text_projection(h_txt[:, 0]))`` over the unimodal encoders' ``[CLS]`` states,
  exactly as ``FlavaForPreTraining`` computes its global contrastive loss.
* MATCH: the ITM head on the multimodal encoder's ``[CLS]``. It outputs two logits
  (index 1 = "match", the positive label of ``itm_labels``); the adapter returns
  ``l_match - l_no_match``, the log-odds of a match under the head's softmax.
* FILL_MASK with an image: ``mmm_text_head`` (multimodal masked modelling) on the text positions
  of the multimodal encoder. Without an image: ``mlm_head`` (unimodal MLM, trained on text-only
  data) on the text encoder.
* TOKEN_STATES with an image: the multimodal encoder's last layer (after its final LayerNorm) at
  the text positions. Without an image: the text encoder's last layer (after its LayerNorm).

Multimodal sequence layout: ``[mm CLS] [image CLS] [patches] [text tokens (T)]`` (transformers'
``FlavaModel`` concatenates the projected image states, then the projected text states, and the
multimodal encoder prepends its own ``[CLS]``), so the text stream is ``[:, -T:]``.

"No image" (``pixel_values=None``) is FLAVA's text-only path above, not a blank image: the model
was pretrained on unimodal text, so this is the natural text-only reference
(Srinivasan & Bisk, 2022, §3.2: P_VL(E), "when no image is provided"). Note that it uses a different
encoder and head than the with-image path.

The image codebook (a DALL-E tokenizer giving MIM targets) only makes pretraining labels and is
never built: its ``image_codebook.*`` keys, present or not in a checkpoint, are ignored; every
other key must match exactly.

Images are resized straight to ``crop_size`` x ``crop_size`` (224 for the public checkpoint),
ignoring the aspect ratio as FLAVA's own processor does, and normalised with the checkpoint's
mean/std (CLIP's), all read from ``preprocessor_config.json``.

Example:
    >>> model = FLAVAAdapter.tiny()
    >>> model.embed_texts(model.prepare_texts(["a man is cooking"])).shape
    torch.Size([1, 32])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import FlavaConfig, FlavaForPreTraining, FlavaImageProcessor

from vlbias.errors import InputError
from vlbias.models.base import Capability, ImageInput, PairedRows, registered_capabilities
from vlbias.models.loading import check_checkpoint, check_keys
from vlbias.models.patches import PatchProjection
from vlbias.models.preprocess import CLIP_MEAN, CLIP_STD, ImageTransform
from vlbias.models.pretrained import ImageTextAdapter, tiny_layers, tiny_vocabulary_ids
from vlbias.models.read_positions import encoder_at_positions
from vlbias.models.tiny_sizes import TinyEmbeddingSizes

CODEBOOK_PREFIX = "image_codebook."


class FLAVAAdapter(ImageTextAdapter):
    """Contrastive embeddings, ITM log-odds, masked-word logits and text-token states from FLAVA.

    The image encoder's patch embedding (a ``Conv2d`` whose stride is its kernel) is replaced, in
    ``model`` itself, by a :class:`~vlbias.models.patches.PatchProjection` holding the same
    parameters: the same outputs up to float rounding, differentiated several times faster by the
    counterfactual-image attack.
    """

    name = "flava"
    capabilities = registered_capabilities(name)
    model_class = FlavaForPreTraining
    center_crop = False
    tiny_sizes = TinyEmbeddingSizes()

    def __init__(self, model: FlavaForPreTraining, tokenizer, transform: ImageTransform) -> None:
        super().__init__(model, tokenizer, transform)
        patch_embeddings = model.flava.image_model.embeddings.patch_embeddings
        patch_embeddings.projection = PatchProjection.replacing(patch_embeddings.projection)

    # -- preprocessing ---------------------------------------------------------------
    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        """Pixel values on the model's device *and dtype*: FLAVA's patch embedding does not cast."""
        return self.transform(images).to(device=self.device, dtype=self.model.dtype)

    def no_image(self, batch_size: int) -> None:
        """FLAVA runs on text alone: ``None`` selects the text encoder and its unimodal MLM head."""
        return None

    # -- capabilities ----------------------------------------------------------------
    def embed_images(self, pixel_values: Tensor) -> Tensor:
        states = self.model.flava.image_model(pixel_values=pixel_values).last_hidden_state  # (B, 1+N, H)
        return F.normalize(self.model.flava.image_projection(states[:, 0]), dim=-1)  # (B, D)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        states = self.model.flava.text_model(**tokens).last_hidden_state  # (B, T, H)
        return F.normalize(self.model.flava.text_projection(states[:, 0]), dim=-1)  # (B, D)

    def match_logits(self, pixel_values: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        """``l_match - l_no_match`` of the ITM head on the multimodal ``[CLS]``: ``(B,)``."""
        logits = self.model.itm_head(self._multimodal_states(pixel_values, tokens))  # (B, 2)
        return logits[:, 1] - logits[:, 0]

    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        """``mmm_text_head`` on the multimodal text positions, or ``mlm_head`` on the text
        encoder when ``pixel_values`` is ``None``: ``(B, T, V)``."""
        if pixel_values is None:
            return self.model.mlm_head(self.model.flava.text_model(**tokens).last_hidden_state)
        return self.model.mmm_text_head(self.token_states(pixel_values, tokens))

    def _paired_fill_mask(self, pixel_values: Tensor | None, tokens: dict[str, Tensor], rows: PairedRows) -> Tensor:
        """:meth:`fill_mask_logits` ``(R, T, V)``, or ``(R, K, V)`` at ``positions``, of rows sharing
        images and texts (see the base class): the image and text encoders and their projections run
        once per distinct image and text, the multimodal encoder once per row, composed as
        ``FlavaModel.forward`` composes them (projected image states, then text states, each encoder's
        last layer before its final LayerNorm); at ``positions`` the multimodal encoder's last layer
        (:func:`~vlbias.models.read_positions.encoder_at_positions`) and the MLM head run there alone."""
        flava = self.model.flava
        if pixel_values is None:
            states = flava.text_model(**tokens).last_hidden_state.index_select(0, rows.text_rows)
            return self.model.mlm_head(rows.at_positions(states))
        image = flava.image_to_mm_projection(
            flava.image_model(pixel_values=pixel_values, output_hidden_states=True).hidden_states[-1]
        )
        text = flava.text_to_mm_projection(flava.text_model(**tokens, output_hidden_states=True).hidden_states[-1])
        if rows.image_rows is not None:
            image = image.index_select(0, rows.image_rows)
        text, attention_mask = text.index_select(0, rows.text_rows), tokens.get("attention_mask")
        multimodal = flava.multimodal_model
        image_length = image.shape[1] + int(multimodal.use_cls_token)
        if attention_mask is not None:  # the image positions, and the multimodal [CLS], are all attended to
            image_mask = torch.ones(image.shape[0], image_length, device=image.device)
            attention_mask = torch.cat([image_mask, attention_mask.index_select(0, rows.text_rows)], dim=1)
        hidden = torch.cat([image, text], dim=1)
        if rows.positions is None:
            states = multimodal(hidden, attention_mask=attention_mask).last_hidden_state
            return self.model.mmm_text_head(states[:, -text.shape[1] :])
        if multimodal.use_cls_token:
            hidden = torch.cat([multimodal.cls_token.expand(hidden.shape[0], -1, -1), hidden], dim=1)
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], device=hidden.device)
        states = encoder_at_positions(multimodal.encoder.layer, hidden, attention_mask, rows.positions + image_length)
        return self.model.mmm_text_head(multimodal.layernorm(states))

    def token_states(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        """Multimodal encoder states at the text positions ``[:, -T:]``, or the text encoder's
        states when ``pixel_values`` is ``None``: ``(B, T, H)``."""
        if pixel_values is None:
            return self.model.flava.text_model(**tokens).last_hidden_state
        length = tokens["input_ids"].shape[1]
        return self._multimodal_states(pixel_values, tokens)[:, -length:]

    def direct_call(
        self, capability: Capability, pixel_values: Tensor | None, tokens: dict[str, Tensor]
    ) -> Tensor | tuple[Tensor, Tensor]:
        """The documented calls: ``FlavaModel.get_image_features``/``get_text_features`` at
        ``[CLS]``, normalised (EMBED); otherwise ``FlavaForPreTraining(...)`` on unmasked text
        (``input_ids_masked = input_ids``) and its ``itm_logits`` (MATCH), ``mmm_text_logits`` or,
        without image, ``mlm_logits`` (FILL_MASK), ``multimodal_masked_embeddings[:, -T:]`` or,
        without image, ``text_embeddings`` (TOKEN_STATES)."""
        if capability is Capability.EMBED:
            image = self.model.flava.get_image_features(pixel_values=pixel_values).pooler_output[:, 0]
            text = self.model.flava.get_text_features(**tokens).pooler_output[:, 0]
            return F.normalize(image, dim=-1), F.normalize(text, dim=-1)
        out = self.model(**tokens, input_ids_masked=tokens["input_ids"], pixel_values=pixel_values, return_loss=False)
        if capability is Capability.MATCH:
            return out.itm_logits[:, 1] - out.itm_logits[:, 0]
        if capability is Capability.FILL_MASK:
            return out.mlm_logits if pixel_values is None else out.mmm_text_logits
        if pixel_values is None:
            return out.text_embeddings
        return out.multimodal_masked_embeddings[:, -tokens["input_ids"].shape[1] :]

    def _multimodal_states(self, pixel_values: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        """Last layer of the multimodal encoder: ``(B, 1 + (1 + N) + T, H)``."""
        if pixel_values.shape[0] != tokens["input_ids"].shape[0]:
            raise InputError(
                f"Expected one image per text, but got {pixel_values.shape[0]} images "
                f"and {tokens['input_ids'].shape[0]} texts."
            )
        return self.model.flava(**tokens, pixel_values=pixel_values).multimodal_embeddings

    @property
    def logit_scale(self) -> Tensor:
        """Log of the contrastive temperature multiplier (``logits = exp(s) * cos``)."""
        return self.model.flava.logit_scale

    # -- persistence -----------------------------------------------------------------
    @classmethod
    def _load_model(cls, name_or_path: str | Path) -> FlavaForPreTraining:
        """A hub id (e.g. ``facebook/flava-full``) or a local ``save_pretrained`` directory, without the image
        codebook; any other missing or unexpected key is an error."""
        check_checkpoint(name_or_path, cls.name, {cls.model_class.config_class.model_type})
        model, info = cls.model_class.from_pretrained(str(name_or_path), init_codebook=False, output_loading_info=True)
        unexpected = [key for key in info["unexpected_keys"] if not key.startswith(CODEBOOK_PREFIX)]
        check_keys(cls.name, name_or_path, info["missing_keys"], unexpected)
        return model

    def _save_transform(self, directory: str | Path) -> None:
        """``preprocessor_config.json`` as ``FlavaImageProcessor`` writes it (size and crop size both the square)."""
        size = {"height": self.transform.image_size, "width": self.transform.image_size}
        processor = FlavaImageProcessor(
            size=size, crop_size=size, image_mean=list(self.transform.mean), image_std=list(self.transform.std)
        )
        processor.save_pretrained(directory)

    @classmethod
    def _load_transform(cls, name_or_path: str | Path, model: FlavaForPreTraining) -> ImageTransform:
        """The crop size, mean and std that ``FlavaImageProcessor`` reads from ``name_or_path``."""
        processor = FlavaImageProcessor.from_pretrained(str(name_or_path))
        return ImageTransform(
            image_size=processor.crop_size["height"],
            mean=tuple(processor.image_mean),
            std=tuple(processor.image_std),
            center_crop=cls.center_crop,
        )

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyEmbeddingSizes) -> FLAVAAdapter:
        """A small random FLAVA without image codebook: image, text and multimodal encoders of ``num_layers``
        layers each (feed-forward 4 x hidden)."""
        layers = tiny_layers(sizes, intermediate_size=4 * sizes.hidden_size)
        config = FlavaConfig(
            text_config=dict(**layers, **tiny_vocabulary_ids(tokenizer), max_position_embeddings=40),
            image_config=dict(**layers, image_size=sizes.image_size, patch_size=sizes.patch_size, vocab_size=64),
            multimodal_config=layers,
            hidden_size=sizes.hidden_size,
            projection_dim=sizes.projection_dim,
            init_codebook=False,
        )
        transform = ImageTransform(
            image_size=sizes.image_size, mean=CLIP_MEAN, std=CLIP_STD, center_crop=cls.center_crop
        )
        return cls(FlavaForPreTraining(config), tokenizer, transform)

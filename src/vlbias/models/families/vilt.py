"""ViLT (Kim et al., 2021) through transformers: one single-stream transformer over word
embeddings and linearly embedded image patches (FILL_MASK, TOKEN_STATES, MATCH).

The public ViLT checkpoints split the heads we need over two models with *different* backbones:

* ``dandelin/vilt-b32-mlm`` -> :class:`~transformers.ViltForMaskedLM`: the pretrained backbone
  and its masked-language-modelling head. transformers does not port the pretraining ITM head
  (``itm_score``), so this checkpoint has no matching logit.
* ``dandelin/vilt-b32-finetuned-coco`` -> :class:`~transformers.ViltForImageAndTextRetrieval`:
  the backbone fine-tuned for COCO retrieval and ``rank_output``, a linear layer on the pooled
  ``[CLS]`` state giving one score per pair.

Sharing one backbone would pair a head with weights it was not trained with, so the adapter holds
both models: FILL_MASK and TOKEN_STATES come from the MLM model, MATCH from the retrieval model.

The MATCH score is the retrieval head's raw output. ViLT initialises ``rank_output`` from the
"match" row of the pretraining ITM classifier and fine-tunes it with a softmax over one positive
and several negative captions, so it ranks captions for an image (and differences between two
captions' scores are log-odds within that softmax) but it is not a calibrated log-odds of a
match in isolation.

Sequence layout inside ViLT: ``[text tokens (T)] [image CLS] [patches]``; the text positions come
first, so the text stream is ``last_hidden_state[:, :T]``.

Images: ViLT's own processor resizes the shorter side to 384 with the longer side at most 640
(multiples of 32) and pads a batch with a ``pixel_mask``. Here every image is resized and centre-
cropped to a fixed square (``image_size``, 384 for the public checkpoints, read from the
checkpoint's ``preprocessor_config.json``) and the ``pixel_mask`` is all ones, so a batch never
holds padding and outputs do not depend on what else is in the batch. ViLT's position embeddings
are interpolated to the patch grid, so any square size works.

Patch embedding: ViLT's own ``visual_embed`` handles padded images of different sizes with a
Python loop over the batch and visits the patches in an order drawn with ``torch.multinomial``
from the global CPU RNG. Our images are never padded, so when every patch is used (the patch grid
has at most ``max_image_length`` cells: 144 <= 200 for the public checkpoints) the adapter embeds
the patches itself (:func:`patch_embeddings`), vectorised and in grid order, and passes them as
``image_embeds``. The transformer is invariant to the patch order (position embeddings are added
to each patch before it is placed), so outputs equal ViLT's own up to float rounding (~1e-7), are
bitwise reproducible and leave the caller's RNG untouched. Larger grids make ViLT keep a random
subset of the patches; the adapter then leaves embedding to ViLT and draws its patch order from
a fixed seed inside ``torch.random.fork_rng`` (:func:`fixed_patch_order`).

Example:
    >>> model = ViLTAdapter.tiny()
    >>> tokens = model.prepare_texts(["a man is [MASK] ."])
    >>> model.fill_mask_logits(None, tokens).shape[:2]
    torch.Size([1, 7])
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import (
    AutoTokenizer,
    ViltConfig,
    ViltForImageAndTextRetrieval,
    ViltForMaskedLM,
    ViltImageProcessor,
)

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ImageInput, ModelAdapter, PairedRows, registered_capabilities
from vlbias.models.loading import from_pretrained_strict
from vlbias.models.patches import project_patches
from vlbias.models.preprocess import ImageTransform
from vlbias.models.pretrained import checkpoint_layers, tiny_layers
from vlbias.models.read_positions import encoder_at_positions
from vlbias.models.tiny_sizes import TinyImageSizes

DEFAULT_ITM_CHECKPOINT = "dandelin/vilt-b32-finetuned-coco"
MLM_SUBFOLDER = "mlm"
ITM_SUBFOLDER = "itm"
VILT_MEAN = (0.5, 0.5, 0.5)  # ViltImageProcessor's defaults (IMAGENET_STANDARD_MEAN/STD)
VILT_STD = (0.5, 0.5, 0.5)
PATCH_ORDER_SEED = 0


@contextlib.contextmanager
def fixed_patch_order() -> Iterator[None]:
    """Seed the CPU RNG that ViLT's patch shuffle draws from, and restore it afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(PATCH_ORDER_SEED)
        yield


def patch_embeddings(embeddings: nn.Module, pixel_values: Tensor) -> Tensor | None:
    """``ViltEmbeddings.visual_embed`` for un-padded images when it keeps every patch, without its
    loop over the batch and in grid order: ``(B, 1 + N, H)`` = [image CLS, patches], each plus its
    (interpolated) position embedding, then dropout. ``None`` when ViLT would keep a random subset."""
    config = embeddings.config
    projection = embeddings.patch_embeddings.projection  # Conv2d, kernel = stride = patch size
    patches = project_patches(projection, pixel_values.to(projection.weight.dtype))  # (B, H, h, w)
    batch_size, hidden, height, width = patches.shape
    limit = config.max_image_length
    if isinstance(limit, int) and limit >= 0 and height * width > limit:
        return None
    grid = config.image_size // config.patch_size
    spatial = embeddings.position_embeddings[:, 1:, :].transpose(1, 2).view(1, hidden, grid, grid)
    position = F.interpolate(spatial, size=(height, width), mode="bilinear", align_corners=True)
    patches = patches.flatten(2).transpose(1, 2) + position.flatten(2).transpose(1, 2)
    cls = (embeddings.cls_token + embeddings.position_embeddings[:, :1, :]).expand(batch_size, -1, -1)
    return embeddings.dropout(torch.cat([cls, patches], dim=1))


class ViLTAdapter(ModelAdapter):
    """Masked-word logits, text-token states and image-text matching scores from ViLT.

    "No image" (``pixel_values=None``): ViLT cannot run without an image, so it gets a completely
    white image, the blank image I' of VLStereoSet (Zhou et al., 2022, §3.5, Eq. 3).
    """

    name = "vilt"
    capabilities = registered_capabilities(name)
    tiny_sizes = TinyImageSizes()

    def __init__(
        self,
        mlm: ViltForMaskedLM,
        retrieval: ViltForImageAndTextRetrieval,
        tokenizer,
        transform: ImageTransform,
    ) -> None:
        super().__init__()
        if mlm.config.vocab_size != retrieval.config.vocab_size:
            raise ConfigError(
                f"ViLT MLM and retrieval models must share a vocabulary, but have vocab_size "
                f"{mlm.config.vocab_size} and {retrieval.config.vocab_size}."
            )
        self.mlm = mlm
        self.retrieval = retrieval
        self.tokenizer = tokenizer
        self.transform = transform
        self.max_text_length = mlm.config.max_position_embeddings

    # -- preprocessing ---------------------------------------------------------------
    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        return self.transform(images).to(self.device)

    def no_image(self, batch_size: int) -> Tensor:
        """A completely white image per item, normalised like any other image: ``(B, 3, S, S)``."""
        size = self.transform.image_size
        return self.transform(torch.ones(batch_size, 3, size, size)).to(self.device)

    # -- capabilities ----------------------------------------------------------------
    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        """MLM logits ``(B, T, V)`` of ``ViltForMaskedLM`` over the text positions."""
        with fixed_patch_order():
            return self.mlm(**self._inputs(self.mlm.vilt, pixel_values, tokens)).logits

    def _paired_fill_mask(self, pixel_values: Tensor | None, tokens: dict[str, Tensor], rows: PairedRows) -> Tensor:
        """:meth:`fill_mask_logits` of the gathered rows (see the base class), with each distinct
        image's patches embedded once; at ``positions`` the encoder's last layer and the MLM head
        (``mlm_score``, as ``ViltForMaskedLM`` applies it to the text states) run there alone
        (:func:`~vlbias.models.read_positions.encoder_at_positions`; text comes first in ViLT's
        sequence, so text positions are sequence positions)."""
        vilt = self.mlm.vilt
        texts = rows.gather(tokens, None)[0]
        with fixed_patch_order():
            inputs = {**texts, **self._image_inputs(vilt, pixel_values, len(rows.text_rows), rows.image_rows)}
            if rows.positions is None:
                states = vilt(**inputs).last_hidden_state[:, : texts["input_ids"].shape[1]]
                return self.mlm.mlm_score(states)
            text_mask = texts.get("attention_mask", torch.ones_like(texts["input_ids"]))
            embeddings, mask = vilt.embeddings(
                input_ids=texts["input_ids"],
                attention_mask=text_mask,
                token_type_ids=texts.get("token_type_ids"),
                pixel_values=inputs.get("pixel_values"),
                pixel_mask=inputs["pixel_mask"],
                inputs_embeds=None,
                image_embeds=inputs.get("image_embeds"),
            )
        states = encoder_at_positions(vilt.encoder.layer, embeddings, mask, rows.positions)
        return self.mlm.mlm_score(vilt.layernorm(states))

    def token_states(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        """Last-layer states of the MLM backbone (after its final LayerNorm) at the text
        positions, ``last_hidden_state[:, :T]``: ``(B, T, H)``."""
        length = tokens["input_ids"].shape[1]
        with fixed_patch_order():
            return self.mlm.vilt(**self._inputs(self.mlm.vilt, pixel_values, tokens)).last_hidden_state[:, :length]

    def match_logits(self, pixel_values: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        """The retrieval head's score ``rank_output(pooler(h_CLS))`` per pair: ``(B,)``
        (a ranking score, see the module docstring)."""
        with fixed_patch_order():
            return self.retrieval(**self._inputs(self.retrieval.vilt, pixel_values, tokens)).logits[:, 0]

    def direct_call(self, capability: Capability, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        """The documented calls, with the model's default ``pixel_mask``:
        ``ViltForMaskedLM(...).logits`` (FILL_MASK), ``ViltModel(...).last_hidden_state[:, :T]``
        (TOKEN_STATES), ``ViltForImageAndTextRetrieval(...).logits[:, 0]`` (MATCH), with the
        patch order drawn from the global RNG as usual. ``None`` pixels are the white image of
        :meth:`no_image`."""
        if pixel_values is None:
            pixel_values = self.no_image(tokens["input_ids"].shape[0])
        if capability is Capability.FILL_MASK:
            return self.mlm(**tokens, pixel_values=pixel_values).logits
        if capability is Capability.TOKEN_STATES:
            states = self.mlm.vilt(**tokens, pixel_values=pixel_values).last_hidden_state
            return states[:, : tokens["input_ids"].shape[1]]
        if capability is Capability.MATCH:
            return self.retrieval(**tokens, pixel_values=pixel_values).logits[:, 0]
        raise self._lacks(capability)

    def _inputs(self, vilt: nn.Module, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> dict[str, Tensor]:
        """Keyword arguments for a forward of the model around ``vilt``: tokens and :meth:`_image_inputs`."""
        return {**tokens, **self._image_inputs(vilt, pixel_values, tokens["input_ids"].shape[0])}

    def _image_inputs(
        self, vilt: nn.Module, pixel_values: Tensor | None, batch_size: int, image_rows: Tensor | None = None
    ) -> dict[str, Tensor]:
        """The images of a batch of ``batch_size`` texts, ``pixel_values[image_rows]`` (white when
        ``None``): the patches embedded by :func:`patch_embeddings` once per image, then gathered,
        with an all-ones mask ``(B, 1 + N)``; or, when ViLT would keep a random subset of patches,
        the gathered pixels with an all-ones ``pixel_mask`` ``(B, H, W)``."""
        if pixel_values is None:
            pixel_values = self.no_image(1)
            image_rows = torch.zeros(batch_size, dtype=torch.long, device=pixel_values.device)
        count = pixel_values.shape[0] if image_rows is None else image_rows.shape[0]
        if count != batch_size:
            raise InputError(f"Expected one image per text, but got {count} images and {batch_size} texts.")

        def gathered(values: Tensor) -> Tensor:
            return values if image_rows is None else values.index_select(0, image_rows)

        image_embeds = patch_embeddings(vilt.embeddings, pixel_values)
        if image_embeds is not None:
            image_embeds = gathered(image_embeds)
            mask = torch.ones(image_embeds.shape[:2], dtype=torch.long, device=image_embeds.device)
            return {"image_embeds": image_embeds, "pixel_mask": mask}
        pixel_values = gathered(pixel_values)
        pixel_mask = torch.ones(batch_size, *pixel_values.shape[-2:], dtype=torch.long, device=pixel_values.device)
        return {"pixel_values": pixel_values, "pixel_mask": pixel_mask}

    # -- training speed --------------------------------------------------------------
    def enable_gradient_checkpointing(self) -> None:
        """transformers' activation checkpointing of the layers of both models, MLM and retrieval
        (:func:`~vlbias.models.pretrained.checkpoint_layers`)."""
        checkpoint_layers(self, self.mlm, self.retrieval)

    # -- persistence -----------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``directory/mlm`` and ``directory/itm``, each a complete transformers checkpoint
        (weights, config, tokenizer, ``preprocessor_config.json``)."""
        processor = ViltImageProcessor(
            size={"shortest_edge": self.transform.image_size},
            image_mean=list(self.transform.mean),
            image_std=list(self.transform.std),
        )
        for subfolder, model in ((MLM_SUBFOLDER, self.mlm), (ITM_SUBFOLDER, self.retrieval)):
            target = Path(directory) / subfolder
            model.save_pretrained(target)
            self.tokenizer.save_pretrained(target)
            processor.save_pretrained(target)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, itm_checkpoint: str | Path | None = None) -> ViLTAdapter:
        """Load both ViLT models.

        * A local directory with ``mlm/`` and ``itm/`` subfolders (what :meth:`save_pretrained`
          writes) loads both from there.
        * Otherwise ``name_or_path`` (hub id or directory) is the MLM checkpoint and
          ``itm_checkpoint`` the retrieval one (default ``dandelin/vilt-b32-finetuned-coco``).

        Tokenizer and image preprocessing come from the MLM checkpoint. Either checkpoint with
        missing or unexpected keys is refused (:func:`~vlbias.models.loading.from_pretrained_strict`).
        """
        root = Path(name_or_path)
        if (root / MLM_SUBFOLDER).is_dir() and (root / ITM_SUBFOLDER).is_dir():
            if itm_checkpoint is not None:
                raise ConfigError(
                    f"{str(root)!r} already holds an `{ITM_SUBFOLDER}/` checkpoint; "
                    f"do not also pass `itm_checkpoint` ({str(itm_checkpoint)!r})."
                )
            mlm_source, itm_source = root / MLM_SUBFOLDER, root / ITM_SUBFOLDER
        else:
            mlm_source, itm_source = name_or_path, itm_checkpoint or DEFAULT_ITM_CHECKPOINT
        mlm = from_pretrained_strict(ViltForMaskedLM, mlm_source, cls.name)
        retrieval = from_pretrained_strict(ViltForImageAndTextRetrieval, itm_source, cls.name)
        tokenizer = AutoTokenizer.from_pretrained(str(mlm_source))
        processor = ViltImageProcessor.from_pretrained(str(mlm_source))
        transform = ImageTransform(
            image_size=processor.size["shortest_edge"],
            mean=tuple(processor.image_mean),
            std=tuple(processor.image_std),
        )
        return cls(mlm, retrieval, tokenizer, transform)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyImageSizes) -> ViLTAdapter:
        """Two small random ViLT models of ``num_layers`` layers (feed-forward 4 x hidden); the retrieval model's
        weights are drawn after the MLM model's, from the same seed."""
        config = ViltConfig(
            **tiny_layers(sizes, intermediate_size=4 * sizes.hidden_size),
            vocab_size=len(tokenizer),
            image_size=sizes.image_size,
            patch_size=sizes.patch_size,
            max_position_embeddings=40,
            pad_token_id=tokenizer.pad_token_id,
        )
        mlm, retrieval = ViltForMaskedLM(config), ViltForImageAndTextRetrieval(config)
        transform = ImageTransform(image_size=sizes.image_size, mean=VILT_MEAN, std=VILT_STD)
        return cls(mlm, retrieval, tokenizer, transform)

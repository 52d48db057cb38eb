"""ALBEF (Li et al., 2021) and TCL (Yang et al., 2022), which shares ALBEF's architecture and
checkpoint format: EMBED (ITC), MATCH (ITM), FILL_MASK (MLM) and TOKEN_STATES.

The modules and the official checkpoint format are in :mod:`vlbias.models.families.albef_modeling`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from jsonargparse.typing import NonNegativeInt, PositiveInt
from torch import Tensor
from transformers import AutoTokenizer

from vlbias.errors import InputError
from vlbias.models.base import (
    Capability,
    ImageInput,
    ModelAdapter,
    PairedRows,
    pair_batches,
    patch_tokens,
    registered_capabilities,
)
from vlbias.models.families.albef_modeling import (
    ALBEF,
    ALBEFConfig,
    LoadReport,
    load_official_state_dict,
    official_layout,
    read_checkpoint,
)
from vlbias.models.loading import check_checkpoint
from vlbias.models.preprocess import ImageTransform
from vlbias.models.tiny_sizes import TinyImageSizes

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.pth"
DEFAULT_TOKENIZER = "bert-base-uncased"  # the official models' vocabulary


@dataclass(frozen=True)
class TinyALBEFSizes(TinyImageSizes):
    """The sizes of a tiny ALBEF (:class:`ALBEFAdapter`; ``num_layers`` counts the BERT's layers, text and fusion).

    Args:
        vision_layers: layers of the ViT image encoder.
        fusion_layer: the first fusion layer of the BERT (``None``: half of ``num_layers``).
        num_heads: attention heads of every layer, image and text.
        intermediate_size: feed-forward width of the BERT's layers.
        embed_dim: dimension of the image and text embeddings (ALBEF's name for the projections' output).
    """

    vision_layers: PositiveInt = 2
    fusion_layer: NonNegativeInt | None = None
    num_heads: PositiveInt = 4
    intermediate_size: PositiveInt = 37
    embed_dim: PositiveInt = 16


class ALBEFAdapter(ModelAdapter):
    """ALBEF/TCL through :class:`~vlbias.models.families.albef_modeling.ALBEF`.

    * EMBED: ``normalize(vision_proj(image CLS))`` and ``normalize(text_proj(text CLS))``, the text
      read after the text-only layers (ALBEF eq. 1; the image-text similarity is their dot product
      divided by ``temp``, so :attr:`logit_scale` is ``log(1 / temp)``).
    * MATCH: ``l[:, 1] - l[:, 0]`` of ``itm_head`` on the fused CLS state, i.e. the log-odds of
      "match" under ALBEF's 2-way ITM softmax (ALBEF eq. 3).
    * FILL_MASK: the MLM head on the fused states of image + (masked) text, as in ALBEF's MLM
      pre-training (eq. 4). Retrieval checkpoints have no MLM head; an adapter loaded from one
      lacks FILL_MASK and says so.
    * TOKEN_STATES: fused text states of the last layer ``(B, T, H)``; positions at padding are
      computed but meaningless (mask them with ``attention_mask``).

    "No image": ALBEF's fusion layers always cross-attend to an image, so ``no_image`` is a
    completely white image (the neutral image of Zhou et al., 2022, VLStereoSet's *vlss*).
    FILL_MASK and TOKEN_STATES use it when ``pixel_values`` is ``None``.

    Preprocessing differs from the official test transform in one way: images are resized on
    the shorter side and centre-cropped (:class:`ImageTransform`) instead of squashed to a square;
    square images are treated identically. Captions are not passed through ALBEF's
    ``pre_caption`` (which strips punctuation, including ``[MASK]``'s brackets).

    The tiny ALBEF (:meth:`tiny`) has 4 BERT layers, 2 of them fusion layers (:attr:`tiny_sizes`).

    Example:
        >>> model = ALBEFAdapter.tiny()
        >>> images = model.prepare_images(torch.rand(2, 3, 32, 32))
        >>> model.match_logits(images, model.prepare_texts(["a man is cooking", "a woman is sewing"])).shape
        torch.Size([2])
    """

    name = "albef"
    capabilities = registered_capabilities(name)
    tiny_sizes = TinyALBEFSizes(num_layers=4)
    # The cross-attention keys and values that paired_match_logits holds at once (images are processed in
    # chunks that fit): 1 GiB is about 50 base-size images at 384 px (6 fusion layers, 577 tokens, width 768).
    key_value_cache_bytes: int = 1 << 30

    def __init__(self, model: ALBEF, tokenizer, loading_report: LoadReport | None = None) -> None:
        super().__init__()
        config = model.config
        if len(tokenizer) > config.vocab_size:
            raise InputError(
                f"Tokenizer has {len(tokenizer)} tokens but the ALBEF model's vocabulary has {config.vocab_size}."
            )
        self.model = model
        self.tokenizer = tokenizer
        self.transform = ImageTransform(image_size=config.image_size, mean=config.image_mean, std=config.image_std)
        self.max_text_length = config.max_position_embeddings
        self.loading_report = loading_report
        if not config.mlm_head:
            self.capabilities = type(self).capabilities - {Capability.FILL_MASK}

    # -- preprocessing ---------------------------------------------------------------
    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        return self.transform(images).to(device=self.device, dtype=self.dtype)

    def no_image(self, batch_size: int) -> Tensor:
        """A batch of completely white images ``(B, 3, S, S)``, normalised."""
        size = self.transform.image_size
        return self.prepare_images(torch.ones(batch_size, 3, size, size))

    # -- capabilities ----------------------------------------------------------------
    def embed_images(self, pixel_values: Tensor) -> Tensor:
        return self.embed_image_states(self.image_states(pixel_values))  # (B, E)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        return self.embed_text_states(self.text_states(tokens))  # (B, E)

    def match_logits(self, pixel_values: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        logits = self.model.itm_logits(self._fused(pixel_values, tokens))  # (B, 2)
        return logits[:, 1] - logits[:, 0]  # (B,)

    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        if Capability.FILL_MASK not in self.capabilities:
            raise self._lacks(Capability.FILL_MASK)
        return self.model.mlm_logits(self._fused(pixel_values, tokens))  # (B, T, V)

    def image_states(self, pixel_values: Tensor) -> Tensor:
        """The vision encoder's tokens ``(B, 1 + N, D)``, CLS first: what ITC, ITM and MLM read."""
        return self.model.image_embeds(pixel_values)

    def embed_image_states(self, image_states: Tensor) -> Tensor:
        return self.model.image_features(image_states)  # (B, E)

    def text_states(self, tokens: dict[str, Tensor]) -> dict[str, Tensor]:
        """The prepared tokens and, as ``"hidden_states"`` ``(B, T, H)``, the states of the text layers (those
        below the fusion layers): what ITC's projection and the ITM pairs' fusion layers both read."""
        return {**tokens, "hidden_states": self.model.text_embeds(tokens["input_ids"], tokens.get("attention_mask"))}

    def embed_text_states(self, text_states: dict[str, Tensor]) -> Tensor:
        return self.model.text_features(_hidden_states(text_states))  # (B, E)

    def match_logits_of_states(
        self, image_states: Tensor, text_states: dict[str, Tensor], image_rows: Tensor, text_rows: Tensor
    ) -> Tensor:
        """Match logits ``(R,)`` of pairs (see the base class): the text layers' states of :meth:`text_states`,
        each fusion layer's cross-attention keys and values once per image, the fusion layers per pair with the
        last at the CLS position alone (:meth:`ALBEF.fuse`), and the ITM head. ALBEF's pre-training step runs its
        fusion layers in full on image tokens gathered per pair; this is the same up to float rounding. It calls
        each layer's ``forward``, so an FSDP unit around a layer gathers its parameters
        (:meth:`paired_match_logits`, for evaluation, calls the layers' parts)."""
        mask = text_states["attention_mask"].index_select(0, text_rows)
        states = _hidden_states(text_states).index_select(0, text_rows)
        cls = torch.zeros(len(text_rows), 1, dtype=torch.long, device=text_rows.device)
        fused = self.model.fuse(states, image_states, mask, image_rows, cls)  # (R, 1, H)
        logits = self.model.itm_logits(fused)  # (R, 2)
        return logits[:, 1] - logits[:, 0]

    def fill_mask_logits_of_states(
        self, image_states: Tensor, tokens: dict[str, Tensor], image_rows: Tensor | None = None
    ) -> Tensor:
        """MLM logits ``(R, T, V)`` (see the base class), each distinct image's cross-attention keys and values
        computed once when ``image_rows`` is given (:meth:`ALBEF.fuse`)."""
        if Capability.FILL_MASK not in self.capabilities:
            raise self._lacks(Capability.FILL_MASK)
        mask = tokens.get("attention_mask")
        text_states = self.model.text_embeds(tokens["input_ids"], mask)
        return self.model.mlm_logits(self.model.fuse(text_states, image_states, mask, image_rows))  # (R, T, V)

    def paired_match_logits(
        self, pixel_values: Tensor, tokens: dict[str, Tensor], image_rows: Tensor, text_rows: Tensor, batch_size: int
    ) -> Tensor:
        """Match logits ``(R,)`` of image-text pairs (see the base class), every image and caption encoded once.

        Per caption, the text layers, the first fusion layer's self-attention (:meth:`ALBEF.fusion_start`) and
        its cross-attention queries (:meth:`ALBEF.fusion_queries`);
        per image, the vision encoder and every fusion layer's cross-attention keys and values
        (:meth:`ALBEF.fusion_keys_values`), for at most :attr:`key_value_cache_bytes` of images at a time; per
        pair, the rest of the fusion layers, the last at the CLS position alone, and the ITM head
        (:meth:`ALBEF.fused_cls`), in batches of ``batch_size`` pairs of captions of similar length, each batch
        cut to its longest caption (padding is masked). Equal to :meth:`match_logits` of the gathered pairs up
        to float rounding."""
        model, mask = self.model, tokens["attention_mask"]
        logits = torch.empty(image_rows.numel(), device=pixel_values.device)
        started = torch.cat(
            [
                model.fusion_start(model.text_embeds(ids, m), m)
                for ids, m in zip(tokens["input_ids"].split(batch_size), mask.split(batch_size), strict=True)
            ]
        )  # (N_c, T, H)
        queries = model.fusion_queries(started)  # (N_c, T, H), None without fusion layers
        lengths = mask.sum(dim=1)
        config = model.config
        per_image = 2 * (config.num_layers - config.fusion_layer) * patch_tokens(pixel_values, config.patch_size)
        per_image *= config.hidden_size * pixel_values.element_size()  # bytes; none without fusion layers
        chunk = max(1, self.key_value_cache_bytes // max(1, per_image))
        for first, stop, batches in pair_batches(image_rows, text_rows, lengths, chunk, len(pixel_values), batch_size):
            embeds = torch.cat([model.image_embeds(p) for p in pixel_values[first:stop].split(batch_size)])
            keys_values = model.fusion_keys_values(embeds)  # per fusion layer, (chunk, heads, 1 + P, H / heads)
            for batch in batches:
                rows = text_rows[batch]
                longest = int(lengths[rows].max())
                texts, text_mask = started[:, :longest].index_select(0, rows), mask[:, :longest].index_select(0, rows)
                text_queries = None if queries is None else queries[:, :longest].index_select(0, rows)
                fused = model.fused_cls(texts, text_mask, keys_values, image_rows[batch] - first, text_queries)
                pair_logits = model.itm_logits(fused)  # (b, 2)
                logits[batch] = pair_logits[:, 1] - pair_logits[:, 0]
        return logits

    def _paired_fill_mask(self, pixel_values: Tensor | None, tokens: dict[str, Tensor], rows: PairedRows) -> Tensor:
        """MLM logits ``(R, T, V)``, or ``(R, K, V)`` at ``positions``, of rows sharing images and texts
        (see the base class). The vision encoder and the text layers below ``fusion_layer`` run once per
        distinct image and text, the fusion layers once per row, their cross-attention keys and values
        once per distinct image (:meth:`ALBEF.fuse`), the last fusion layer and the MLM head at
        ``positions`` alone. Each encoder reads one input alone, so this equals gathering first."""
        image_rows = rows.image_rows
        if pixel_values is None:
            pixel_values, image_rows = self.no_image(1), torch.zeros_like(rows.text_rows)
        image_embeds = self.model.image_embeds(pixel_values)
        attention_mask = tokens.get("attention_mask")
        text_embeds = self.model.text_embeds(tokens["input_ids"], attention_mask).index_select(0, rows.text_rows)
        mask = None if attention_mask is None else attention_mask.index_select(0, rows.text_rows)
        return self.model.mlm_logits(self.model.fuse(text_embeds, image_embeds, mask, image_rows, rows.positions))

    def token_states(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        return self._fused(pixel_values, tokens)  # (B, T, H)

    def direct_call(
        self, capability: Capability, pixel_values: Tensor | None, tokens: dict[str, Tensor]
    ) -> Tensor | tuple[Tensor, Tensor]:
        """The official code's calls (``model_pretrain.py``/``model_retrieval.py``) on ``self.model``'s
        submodules: the ViT's token sequence; ``bert(mode="text")`` then ``bert(mode="fusion")`` for
        ITC/ITM; one ``bert(mode="multi_modal")`` call for MLM and token states."""
        model, input_ids, attention_mask = self.model, tokens["input_ids"], tokens.get("attention_mask")
        if pixel_values is None:
            pixel_values = self.no_image(input_ids.shape[0])
        image_embeds = model.visual_encoder.forward_features(pixel_values)
        if capability in (Capability.EMBED, Capability.MATCH):
            text_embeds = model.text_encoder.bert(input_ids, attention_mask=attention_mask, mode="text")
            if capability is Capability.EMBED:
                image_feat = F.normalize(model.vision_proj(image_embeds[:, 0, :]), dim=-1)
                text_feat = F.normalize(model.text_proj(text_embeds[:, 0, :]), dim=-1)
                return image_feat, text_feat
            output = model.text_encoder.bert(
                encoder_embeds=text_embeds,
                attention_mask=attention_mask,
                encoder_hidden_states=image_embeds,
                mode="fusion",
            )
            log_probs = model.itm_head(output[:, 0, :]).log_softmax(dim=-1)
            return log_probs[:, 1] - log_probs[:, 0]
        output = model.text_encoder.bert(
            input_ids, attention_mask=attention_mask, encoder_hidden_states=image_embeds, mode="multi_modal"
        )
        return model.text_encoder.cls(output) if capability is Capability.FILL_MASK else output

    @property
    def logit_scale(self) -> Tensor:
        """``log(1 / temp)``: image-text similarities are scaled by ``1 / temp`` (ALBEF eq. 1)."""
        return -torch.log(self.model.temp)

    @property
    def dtype(self) -> torch.dtype:
        return self.model.vision_proj.weight.dtype

    # -- internals -------------------------------------------------------------------
    def _fused(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        input_ids, attention_mask = tokens["input_ids"], tokens.get("attention_mask")
        if pixel_values is None:
            pixel_values = self.no_image(input_ids.shape[0])
        if pixel_values.shape[0] != input_ids.shape[0]:
            raise InputError(
                f"Expected as many images as texts but got {pixel_values.shape[0]} images and {input_ids.shape[0]} texts."
            )
        text_embeds = self.model.text_embeds(input_ids, attention_mask)
        return self.model.fuse(text_embeds, self.model.image_embeds(pixel_values), attention_mask)  # (B, T, H)

    # -- training speed --------------------------------------------------------------
    def enable_gradient_checkpointing(self) -> None:
        """Each ViT block and BERT layer checkpointed (:meth:`ALBEF.set_grad_checkpointing`)."""
        self.model.set_grad_checkpointing(True)

    # -- persistence -----------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``config.json`` (:class:`ALBEFConfig`), ``model.pth`` (``{"model": state_dict}`` with
        the official key names) and the tokenizer files."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / CONFIG_FILE).write_text(json.dumps(self.model.config.to_dict(), indent=2))
        torch.save({"model": self.model.state_dict()}, directory / WEIGHTS_FILE)
        self.tokenizer.save_pretrained(directory)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        tokenizer: object | str | Path | None = None,
        image_size: int | None = None,
        config: ALBEFConfig | None = None,
    ) -> ALBEFAdapter:
        """Load an official ALBEF/TCL checkpoint (a ``.pth`` file or its URL, e.g.
        ``https://storage.googleapis.com/sfr-pcl-data-research/ALBEF/ALBEF.pth``) or a directory
        written by :meth:`save_pretrained`.

        Args:
            name_or_path: the ``.pth`` file, its URL, or a ``save_pretrained`` directory.
            tokenizer: a tokenizer, or a hub id / directory to load one from; default: the
                directory's own tokenizer, else ``bert-base-uncased`` (the official vocabulary).
            image_size: resolution to run at; default: the checkpoint's own (pre-training 256,
                retrieval 384). Another size interpolates the position embeddings.
            config: architecture of a ``.pth`` file; default: the released base models'
                (:class:`ALBEFConfig`). A directory's ``config.json`` takes precedence.
        """
        check_checkpoint(name_or_path, cls.name)
        path = Path(name_or_path)
        if path.is_dir():
            missing = [name for name in (CONFIG_FILE, WEIGHTS_FILE) if not (path / name).is_file()]
            if missing:
                raise InputError(
                    f"ALBEF directory {str(path)!r} lacks {', '.join(missing)}; expected a save_pretrained directory."
                )
            config = ALBEFConfig.from_dict(json.loads((path / CONFIG_FILE).read_text()))
            state_dict = read_checkpoint(path / WEIGHTS_FILE)
            tokenizer = str(path) if tokenizer is None else tokenizer
        else:
            state_dict = read_checkpoint(name_or_path)
            config = config or ALBEFConfig()
            tokenizer = DEFAULT_TOKENIZER if tokenizer is None else tokenizer
        if isinstance(tokenizer, str | Path):
            tokenizer = _load_tokenizer(tokenizer)
        if image_size is None and "visual_encoder.pos_embed" in state_dict:
            image_size = round((state_dict["visual_encoder.pos_embed"].shape[1] - 1) ** 0.5) * config.patch_size
        config = dataclasses.replace(
            config, image_size=image_size or config.image_size, mlm_head=official_layout(state_dict) == "pretrain"
        )
        model = ALBEF(config)
        report = load_official_state_dict(model, state_dict, name_or_path)
        _log_report(report, name_or_path)
        return cls(model, tokenizer, report)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyALBEFSizes) -> ALBEFAdapter:
        """A small random ALBEF: ``vision_layers`` ViT layers, ``num_layers`` BERT layers of which the last are
        fusion layers from ``fusion_layer`` on (half of them by default, as in ALBEF, 6 of 12)."""
        config = ALBEFConfig(
            image_size=sizes.image_size,
            patch_size=sizes.patch_size,
            vision_width=sizes.hidden_size,  # cross-attention needs equal widths
            vision_layers=sizes.vision_layers,
            vision_heads=sizes.num_heads,
            vocab_size=len(tokenizer),
            hidden_size=sizes.hidden_size,
            num_layers=sizes.num_layers,
            fusion_layer=sizes.num_layers // 2 if sizes.fusion_layer is None else sizes.fusion_layer,
            num_heads=sizes.num_heads,
            intermediate_size=sizes.intermediate_size,
            max_position_embeddings=64,
            embed_dim=sizes.embed_dim,
            pad_token_id=tokenizer.pad_token_id,
        )
        return cls(ALBEF(config), tokenizer)


def _load_tokenizer(name_or_path: str | Path):
    try:
        return AutoTokenizer.from_pretrained(str(name_or_path))
    except OSError as err:
        raise InputError(
            f"Tokenizer {str(name_or_path)!r} could not be loaded ({' '.join(str(err).split())}); pass `tokenizer=` a directory "
            f"holding bert-base-uncased's vocab.txt or a tokenizer object."
        ) from err


def _log_report(report: LoadReport, source: str | Path) -> None:
    # momentum copies (visual_encoder_m.*, ...) counted per module, the other ignored keys by name
    groups = Counter(key.split(".")[0] if key.split(".")[0].endswith("_m") else key for key in report.ignored)
    ignored = ", ".join(f"{prefix} ({n})" for prefix, n in sorted(groups.items())) or "none"
    old, new = report.pos_embed_grid
    resized = f"; position embeddings interpolated from {old}x{old} to {new}x{new} patches" if old != new else ""
    logger.info("Loaded ALBEF %s checkpoint %s; ignored entries: %s%s.", report.layout, source, ignored, resized)


def _hidden_states(text_states: dict[str, Tensor]) -> Tensor:
    """The text layers' states ``(B, T, H)`` in what :meth:`ALBEFAdapter.text_states` returned."""
    if "hidden_states" not in text_states:
        raise InputError(
            "ALBEF reads the text states of `adapter.text_states(tokens)` (the tokens and the text layers' "
            f"'hidden_states'), but was given a dict of {sorted(text_states)}."
        )
    return text_states["hidden_states"]

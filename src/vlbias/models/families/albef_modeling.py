"""ALBEF (Li et al., 2021, "Align before Fuse") as plain ``nn.Module``s whose parameter names
are those of the official checkpoints (github.com/salesforce/ALBEF, ``models/model_pretrain.py``;
TCL, github.com/uta-smile/TCL, uses the same modules and names).

* ``visual_encoder``: timm's ``VisionTransformer`` (ViT-B/16, LayerNorm eps 1e-6, no head); its
  names (``cls_token``, ``pos_embed``, ``patch_embed.proj``, ``blocks.N.{norm1,attn.qkv,attn.proj,
  norm2,mlp.fc1,mlp.fc2}``, ``norm``) are ALBEF's own ViT's.
* ``text_encoder.bert``: BERT embeddings and ``encoder.layer.N`` built from transformers' BERT
  attention/feed-forward blocks; layers ``N >= fusion_layer`` add ``crossattention`` over the image
  tokens. ``text_encoder.cls.predictions``: the MLM head, decoder tied to the word embeddings.
* ``vision_proj``, ``text_proj`` (ITC projections), ``itm_head`` (2-way ITM classifier), ``temp``.

The text encoder runs in three modes, as in ALBEF's ``xbert.py``: ``"text"`` (layers
``0..fusion_layer-1``, no image), ``"fusion"`` (layers ``fusion_layer..L-1`` on given text states,
cross-attending to the image) and ``"multi_modal"`` (all layers, from token ids).

Official checkpoint files hold ``{"model": state_dict, ...}``. Besides this module's keys they
carry the momentum-distillation copies (``*_m.*``), the ITC queues (``image_queue``,
``text_queue``, ``idx_queue``, ``queue_ptr``) and the BERT buffer ``embeddings.position_ids``;
:func:`load_official_state_dict` drops exactly those and reports them. Retrieval fine-tuned
checkpoints (``model_retrieval.py``) hold a bare ``BertModel`` as ``text_encoder.*`` (no
``bert.`` level, no MLM head); :func:`official_layout` detects this.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import BertConfig
from transformers.models.bert.modeling_bert import (
    BertAttention,
    BertEmbeddings,
    BertIntermediate,
    BertOnlyMLMHead,
    BertOutput,
)

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import at_positions
from vlbias.models.loading import check_keys
from vlbias.models.patches import PatchProjection
from vlbias.models.read_positions import additive_mask, attention_at, split_heads

MODES = ("text", "fusion", "multi_modal")

# Rows grouped by the image they read (:func:`binary_groups`): per group size, (size, member rows, group images).
ImageGroups = list[tuple[int, Tensor, Tensor]]

# Checkpoint entries that are not part of the inference model: momentum encoders, ITC queues and
# the position-id buffer older transformers saved. Dropped explicitly and reported.
IGNORED_KEYS = re.compile(
    r"^(visual_encoder_m|text_encoder_m|vision_proj_m|text_proj_m)\."
    r"|^(image_queue|text_queue|idx_queue|queue_ptr)$"
    r"|^text_encoder\.bert\.embeddings\.position_ids$"
)


@dataclass(frozen=True)
class ALBEFConfig:
    """Sizes of an ALBEF model; the defaults are the released ALBEF/TCL base models
    (``configs/Pretrain.yaml`` and ``configs/config_bert.json`` of the official repositories).

    ``image_size`` is the resolution the model runs at (pre-training 256, retrieval 384); a
    checkpoint trained at another resolution has its position embeddings interpolated
    (:func:`interpolate_pos_embed`). ``mlm_head`` is false for retrieval checkpoints, which have none.
    """

    image_size: int = 256
    patch_size: int = 16
    vision_width: int = 768
    vision_layers: int = 12
    vision_heads: int = 12
    vision_mlp_ratio: float = 4.0
    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    fusion_layer: int = 6
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    embed_dim: int = 256
    pad_token_id: int = 0
    temp: float = 0.07
    mlm_head: bool = True
    image_mean: tuple[float, float, float] = field(default=(0.48145466, 0.4578275, 0.40821073))
    image_std: tuple[float, float, float] = field(default=(0.26862954, 0.26130258, 0.27577711))

    def __post_init__(self) -> None:
        if not 0 <= self.fusion_layer <= self.num_layers:
            raise ConfigError(f"Expected `fusion_layer` in [0, {self.num_layers}] but got {self.fusion_layer}.")
        if self.vision_width != self.hidden_size:
            raise ConfigError(
                f"Expected `vision_width` == `hidden_size` (the cross-attention keys read image tokens of the "
                f"text width) but got {self.vision_width} and {self.hidden_size}."
            )
        if self.image_size % self.patch_size:
            raise ConfigError(
                f"Expected `image_size` ({self.image_size}) to be a multiple of `patch_size` ({self.patch_size})."
            )

    @property
    def grid(self) -> int:
        """Patches per image side."""
        return self.image_size // self.patch_size

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ALBEFConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"Unknown ALBEF config field(s) {unknown}; expected some of: {', '.join(sorted(known))}.")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**values)

    def bert_config(self) -> BertConfig:
        """transformers' ``BertConfig`` for the text encoder (bert-base-uncased's other settings)."""
        return BertConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=self.max_position_embeddings,
            pad_token_id=self.pad_token_id,
            layer_norm_eps=1e-12,
            type_vocab_size=2,
            attn_implementation="sdpa",
        )


class ALBEFLayer(nn.Module):
    """One BERT layer: self-attention, then (fusion layers only) cross-attention to the image
    tokens, then the feed-forward block; post-LayerNorm residuals as in BERT."""

    def __init__(self, config: BertConfig, cross_attention: bool) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        if cross_attention:
            self.crossattention = BertAttention(config, is_cross_attention=True)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    @property
    def has_cross_attention(self) -> bool:
        return hasattr(self, "crossattention")

    def forward(
        self,
        hidden: Tensor,
        mask: Tensor,
        image_embeds: Tensor | None = None,
        image_groups: ImageGroups | None = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """``hidden`` ``(B, T, H)``; ``image_embeds`` ``(B, N, H)``, or with ``image_groups``
        (:func:`binary_groups` of ``image_rows`` ``(B,)``) the distinct images ``(M, N, H)`` that row ``b``
        reads as ``image_embeds[image_rows[b]]``. With
        ``positions`` ``(B, K)`` the layer's output at those positions alone ``(B, K, H)``: their
        queries attend to every position, the rest of the layer runs for them only
        (:mod:`vlbias.models.read_positions`)."""
        hidden = self.self_attend(hidden, mask, positions)
        if self.has_cross_attention:
            if image_embeds is None:
                raise InputError("ALBEF's fusion layers need image embeddings (`encoder_hidden_states`).")
            if image_groups is None:
                hidden = self.crossattention(hidden, encoder_hidden_states=image_embeds, encoder_attention_mask=None)[0]
            else:
                hidden = self.cross_attend_cached(hidden, *self.image_keys_values(image_embeds), image_groups)
        return self.feed_forward(hidden)

    def self_attend(self, hidden: Tensor, mask: Tensor, positions: Tensor | None = None) -> Tensor:
        """The self-attention block (with its residual and LayerNorm) over ``hidden`` ``(B, T, H)`` with the
        additive mask ``(B, 1, 1, T)``; with ``positions`` ``(B, K)`` its output there alone ``(B, K, H)``."""
        if positions is None:
            return self.attention(hidden, mask)[0]  # (B, T, H)
        queries = at_positions(hidden, positions)  # (B, K, H)
        return self.attention.output(attention_at(self.attention.self, queries, hidden, mask), queries)

    def feed_forward(self, hidden: Tensor) -> Tensor:
        """The feed-forward block (with its residual and LayerNorm), position by position."""
        return self.output(self.intermediate(hidden), hidden)

    def image_keys_values(self, image_embeds: Tensor) -> tuple[Tensor, Tensor]:
        """The cross-attention's keys and values of image tokens ``(M, N, H)``, split into heads:
        two ``(M, heads, N, H / heads)`` tensors, for :meth:`cross_attend_cached`."""
        attention, size = self.crossattention.self, self.crossattention.self.attention_head_size
        # contiguous: cross_attend_cached gathers their rows, many times slower from a transposed view
        keys = split_heads(attention.key(image_embeds), size).contiguous()
        return keys, split_heads(attention.value(image_embeds), size).contiguous()

    def cross_queries(self, hidden: Tensor) -> Tensor:
        """The cross-attention's queries of ``hidden`` ``(B, T, H)``, for :meth:`cross_attend_cached`."""
        return self.crossattention.self.query(hidden)

    def cross_attend_cached(
        self, hidden: Tensor, keys: Tensor, values: Tensor, image_groups: ImageGroups, queries: Tensor | None = None
    ) -> Tensor:
        """The cross-attention block over ``hidden`` ``(B, T, H)``, row ``b`` reading image ``image_rows[b]`` of
        keys and values already projected (:meth:`image_keys_values`, ``(M, heads, N, H / heads)``): the same as
        the cross-attention of :meth:`forward`, without projecting an image's tokens again for every row.
        ``image_groups``: :func:`binary_groups` of ``image_rows`` (computed once for all fusion layers);
        ``queries``: :meth:`cross_queries` of ``hidden`` when the caller has them (projected once per text).

        Each text token attends to its image alone, so rows that read the same image can share one query
        sequence against it. An image read by ``c`` rows gets one group of ``2^j`` rows for every bit ``j`` set
        in ``c`` (13 rows: groups of 8, 4 and 1), and each size of group is one attention call over copies of
        its images' keys and values: no padded rows, at most one copy of an image per bit of ``B``
        (:func:`binary_groups`; one copy per row, at base width and 577 image tokens, costs more than the
        attention itself)."""
        attention = self.crossattention.self
        rows, length = hidden.shape[:2]
        queries = self.cross_queries(hidden) if queries is None else queries
        query = queries.view(rows, length, -1, attention.attention_head_size)  # (B, T, heads, d)
        context = torch.empty_like(query)
        for size, members, images in image_groups:
            grouped = query.index_select(0, members).view(-1, size * length, *query.shape[2:])  # (G, size*T, ..)
            attended = F.scaled_dot_product_attention(
                grouped.transpose(1, 2),  # (G, heads, size * T, d)
                keys.index_select(0, images),
                values.index_select(0, images),
                dropout_p=attention.dropout.p if attention.training else 0.0,
            )
            context.index_copy_(0, members, attended.transpose(1, 2).reshape(-1, *query.shape[1:]))
        return self.crossattention.output(context.flatten(2), hidden)


def binary_groups(image_rows: Tensor) -> ImageGroups:
    """Rows ``b`` of a batch, grouped by the image ``image_rows[b]`` they read into groups whose sizes are
    powers of two: an image read by ``c`` rows gets one group of ``2^j`` of them for every bit ``j`` set in
    ``c``. Returned per size, largest first, as ``(size, members, images)``: ``members`` ``(G * size,)``, the
    rows of the ``G`` groups of that size one group after the other, and ``images`` ``(G,)``, the image of
    each group. Every row is in exactly one group.

    A row of rank ``r`` among its image's ``c`` rows (in batch order) is in the group of the highest bit
    where ``r`` and ``c`` differ (``c`` has it set, ``r < c`` has not), at place ``r mod 2^j`` there.

    Example:
        >>> [(size, m.tolist(), i.tolist()) for size, m, i in binary_groups(torch.tensor([5, 2, 5, 5, 2]))]
        [(2, [1, 4, 0, 2], [2, 5]), (1, [3], [5])]
    """
    order = image_rows.argsort(stable=True)  # rows by image, each image's rows in batch order
    images, counts = torch.unique_consecutive(image_rows[order], return_counts=True)
    count = counts.repeat_interleave(counts)  # the row's image's count, in that order
    rank = torch.arange(order.numel(), device=order.device) - (counts.cumsum(0) - counts).repeat_interleave(counts)
    level = torch.frexp((count ^ rank).double()).exponent - 1  # highest differing bit
    groups = []
    for bit in level.unique().flip(0).tolist():
        at = (level == bit).nonzero().flatten()  # in order: each image's group of 2^bit rows is contiguous
        groups.append((1 << bit, order[at], image_rows[order[at[:: 1 << bit]]]))
    return groups


class ALBEFEncoder(nn.Module):
    def __init__(self, config: BertConfig, fusion_layer: int) -> None:
        super().__init__()
        self.layer = nn.ModuleList(
            ALBEFLayer(config, cross_attention=i >= fusion_layer) for i in range(config.num_hidden_layers)
        )


class ALBEFBert(nn.Module):
    """ALBEF's BERT: embeddings + layers, run in one of :data:`MODES` (``xbert.BertModel``'s
    keyword names, so calls read like the official code)."""

    def __init__(self, config: BertConfig, fusion_layer: int) -> None:
        super().__init__()
        self.fusion_layer = fusion_layer
        self.embeddings = BertEmbeddings(config)
        self.encoder = ALBEFEncoder(config, fusion_layer)
        self.gradient_checkpointing = False  # ALBEF.set_grad_checkpointing

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        encoder_embeds: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        mode: str = "multi_modal",
        encoder_rows: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """Last hidden states ``(B, T, H)``. ``input_ids`` for modes "text" and "multi_modal";
        ``encoder_embeds`` (the text-mode output) for "fusion"; ``encoder_hidden_states`` (image
        tokens ``(B, N, H)``) for "fusion" and "multi_modal"; ``attention_mask`` ``(B, T)``, 1 = token.
        ``encoder_rows`` ``(B,)``: text ``b`` reads image ``encoder_hidden_states[encoder_rows[b]]``
        of ``(M, N, H)`` distinct images; ``positions`` ``(B, K)``: the states ``(B, K, H)`` there alone,
        the last layer computing only those (neither in the official code)."""
        if mode not in MODES:
            raise ConfigError(f"Expected `mode` to be one of {MODES} but got {mode!r}.")
        if mode == "fusion":
            if encoder_embeds is None:
                raise InputError("Mode 'fusion' needs `encoder_embeds` (the text-mode hidden states).")
            hidden = encoder_embeds
        else:
            if input_ids is None:
                raise InputError(f"Mode {mode!r} needs `input_ids`.")
            hidden = self.embeddings(input_ids=input_ids)
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
        additive = additive_mask(attention_mask, hidden.dtype)  # (B, 1, 1, T)
        start = self.fusion_layer if mode == "fusion" else 0
        stop = self.fusion_layer if mode == "text" else len(self.encoder.layer)
        layers = self.encoder.layer[start:stop]
        groups = None if encoder_rows is None else binary_groups(encoder_rows)
        recompute = self.gradient_checkpointing and self.training
        for index, layer in enumerate(layers):
            inputs = (hidden, additive, encoder_hidden_states, groups, positions if index == len(layers) - 1 else None)
            hidden = checkpoint(layer, *inputs, use_reentrant=False) if recompute else layer(*inputs)
        return hidden if positions is None or len(layers) else at_positions(hidden, positions)


class ALBEFTextEncoder(nn.Module):
    """``bert`` plus, when ``mlm_head``, the MLM head ``cls`` with its decoder weight tied to the
    word embeddings and its decoder bias tied to ``cls.predictions.bias`` (as in BERT)."""

    def __init__(self, config: BertConfig, fusion_layer: int, mlm_head: bool) -> None:
        super().__init__()
        self.bert = ALBEFBert(config, fusion_layer)
        if mlm_head:
            self.cls = BertOnlyMLMHead(config)
            self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight
            self.cls.predictions.decoder.bias = self.cls.predictions.bias


class ALBEF(nn.Module):
    """The inference part of ALBEF/TCL (no momentum encoders, no queues).

    Example:
        >>> config = ALBEFConfig(image_size=32, patch_size=8, vision_width=32, vision_layers=1, vision_heads=4,
        ...     vocab_size=50, hidden_size=32, num_layers=2, fusion_layer=1, num_heads=4, intermediate_size=37,
        ...     max_position_embeddings=16, embed_dim=16)
        >>> model = ALBEF(config).eval()
        >>> image = model.image_embeds(torch.rand(2, 3, 32, 32))
        >>> image.shape
        torch.Size([2, 17, 32])
        >>> text = model.text_embeds(torch.tensor([[2, 7, 3], [2, 9, 3]]))
        >>> model.itm_logits(model.fuse(text, image)).shape
        torch.Size([2, 2])
    """

    def __init__(self, config: ALBEFConfig) -> None:
        super().__init__()
        self.config = config
        self.visual_encoder = VisionTransformer(
            img_size=config.image_size,
            patch_size=config.patch_size,
            embed_dim=config.vision_width,
            depth=config.vision_layers,
            num_heads=config.vision_heads,
            mlp_ratio=config.vision_mlp_ratio,
            qkv_bias=True,
            num_classes=0,
            norm_layer=partial(nn.LayerNorm, eps=1e-6),
        )
        patch_embed = self.visual_encoder.patch_embed  # the same projection, differentiated several times faster
        patch_embed.proj = PatchProjection.replacing(patch_embed.proj)
        bert = config.bert_config()
        self.text_encoder = ALBEFTextEncoder(bert, config.fusion_layer, config.mlm_head)
        self.vision_proj = nn.Linear(config.vision_width, config.embed_dim)
        self.text_proj = nn.Linear(config.hidden_size, config.embed_dim)
        self.itm_head = nn.Linear(config.hidden_size, 2)
        self.temp = nn.Parameter(torch.tensor(config.temp))

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Whether each ViT block (timm's own checkpointing: non-reentrant, wherever gradients are computed) and
        each BERT layer run by :class:`ALBEFBert` (``torch.utils.checkpoint.checkpoint``, ``use_reentrant=False``, in
        training mode) keeps only its inputs and recomputes its activations in the backward pass (open_clip's and
        timm's name)."""
        self.visual_encoder.set_grad_checkpointing(enable)
        self.text_encoder.bert.gradient_checkpointing = enable

    def image_embeds(self, pixel_values: Tensor) -> Tensor:
        """Image tokens ``(B, 1 + N, D)``, CLS first, after the final LayerNorm."""
        return self.visual_encoder.forward_features(pixel_values)

    def text_embeds(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Text-mode states ``(B, T, H)`` (layers below ``fusion_layer``)."""
        return self.text_encoder.bert(input_ids=input_ids, attention_mask=attention_mask, mode="text")

    def fuse(
        self,
        text_embeds: Tensor,
        image_embeds: Tensor,
        attention_mask: Tensor | None = None,
        image_rows: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """Fused text states ``(B, T, H)``: the fusion layers over text-mode states and image tokens,
        text ``b`` reading image ``b``, or ``image_embeds[image_rows[b]]`` when ``image_rows`` is given
        (each distinct image's cross-attention keys and values are then computed once); with
        ``positions`` ``(B, K)`` the states there ``(B, K, H)``, the last layer computing only those."""
        return self.text_encoder.bert(
            encoder_embeds=text_embeds,
            attention_mask=attention_mask,
            encoder_hidden_states=image_embeds,
            mode="fusion",
            encoder_rows=image_rows,
            positions=positions,
        )

    @property
    def fusion_layers(self) -> nn.ModuleList:
        """The text encoder's layers from ``fusion_layer`` on, those that cross-attend to the image."""
        return self.text_encoder.bert.encoder.layer[self.config.fusion_layer :]

    def fusion_start(self, text_embeds: Tensor, attention_mask: Tensor) -> Tensor:
        """The first fusion layer's self-attention over text-mode states ``(B, T, H)`` (the states as they are
        when there is no fusion layer). It reads the text alone, so scoring many image-text pairs
        (:meth:`fused_cls`) runs it once per text, not once per pair."""
        layers = self.fusion_layers
        if not len(layers):
            return text_embeds
        return layers[0].self_attend(text_embeds, additive_mask(attention_mask, text_embeds.dtype))

    def fusion_queries(self, started: Tensor) -> Tensor | None:
        """The first fusion layer's cross-attention queries of :meth:`fusion_start`'s states ``(B, T, H)``
        (``None`` without fusion layers). They too depend on the text alone: :meth:`fused_cls` takes them
        computed once per text."""
        layers = self.fusion_layers
        return layers[0].cross_queries(started) if len(layers) else None

    def fusion_keys_values(self, image_embeds: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Every fusion layer's cross-attention keys and values of the image tokens ``(M, N, H)``
        (:meth:`ALBEFLayer.image_keys_values`), computed once per image for :meth:`fused_cls`."""
        layers = self.fusion_layers
        return [layer.image_keys_values(image_embeds) for layer in layers]

    def fused_cls(
        self,
        started: Tensor,
        attention_mask: Tensor,
        keys_values: list[tuple[Tensor, Tensor]],
        image_rows: Tensor,
        queries: Tensor | None = None,
    ) -> Tensor:
        """The fused state at the CLS position ``(B, 1, H)`` of texts ``started`` (:meth:`fusion_start`,
        ``(B, T, H)``) paired with images ``image_rows`` ``(B,)`` of ``keys_values``
        (:meth:`fusion_keys_values`): equal to ``fuse(...)[:, :1]`` up to float rounding. ``queries``:
        :meth:`fusion_queries` of ``started``, when computed once per text. What ITM reads, at the cost per
        pair of the fusion layers without the text-only first self-attention and query projection, without
        projecting image tokens, and with the last layer at the CLS position alone (none of which the official
        evaluation does: it runs the fusion layers in full on image tokens gathered per pair)."""
        layers = self.fusion_layers
        hidden = started
        if not len(layers):
            return hidden[:, :1]
        bias = additive_mask(attention_mask, hidden.dtype)
        cls = torch.zeros(hidden.shape[0], 1, dtype=torch.long, device=hidden.device)
        groups = binary_groups(image_rows)
        for index, (layer, (keys, values)) in enumerate(zip(layers, keys_values, strict=True)):
            last = index == len(layers) - 1
            if index:
                hidden, queries = layer.self_attend(hidden, bias, cls if last else None), None
            elif last:
                hidden, queries = hidden[:, :1], None if queries is None else queries[:, :1]
            hidden = layer.feed_forward(layer.cross_attend_cached(hidden, keys, values, groups, queries))
        return hidden

    def image_features(self, image_embeds: Tensor) -> Tensor:
        """ITC image embedding ``normalize(vision_proj(CLS))`` ``(B, E)`` (ALBEF eq. 1's g_v)."""
        return F.normalize(self.vision_proj(image_embeds[:, 0]), dim=-1)

    def text_features(self, text_embeds: Tensor) -> Tensor:
        """ITC text embedding ``normalize(text_proj(CLS))`` ``(B, E)`` (ALBEF eq. 1's g_w)."""
        return F.normalize(self.text_proj(text_embeds[:, 0]), dim=-1)

    def itm_logits(self, fused: Tensor) -> Tensor:
        """The two ITM logits ``(B, 2)`` (index 1 = match) from the fused CLS state."""
        return self.itm_head(fused[:, 0])

    def mlm_logits(self, fused: Tensor) -> Tensor:
        """MLM logits ``(B, T, V)`` from fused states."""
        if not self.config.mlm_head:
            raise ConfigError("This ALBEF model has no MLM head (retrieval checkpoints do not ship one).")
        return self.text_encoder.cls(fused)


# -- official checkpoints ----------------------------------------------------------------------
def read_checkpoint(source: str | Path) -> dict[str, Tensor]:
    """The state dict of an official checkpoint: a local ``.pth`` file or an ``http(s)://`` URL
    (fetched once into torch's hub cache, as ALBEF itself fetches DeiT). The file holds
    ``{"model": state_dict, ...}`` (``Pretrain.py``/``Retrieval.py``: ``save_obj``)."""
    source = str(source)
    if source.startswith(("http://", "https://")):
        try:
            checkpoint = torch.hub.load_state_dict_from_url(source, map_location="cpu", weights_only=True)
        except OSError as err:  # urllib's URLError (no network, no such host) is an OSError
            raise InputError(
                f"ALBEF checkpoint {source!r} cannot be fetched ({getattr(err, 'reason', err)}): download it where the "
                "URL is reachable and give the local .pth file as the checkpoint instead."
            ) from None
    else:
        if not Path(source).is_file():
            raise InputError(f"ALBEF checkpoint {source!r} does not exist.")
        try:
            checkpoint = torch.load(source, map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises several unrelated types for files that are not checkpoints
            raise InputError(f"ALBEF checkpoint {source!r} could not be read as a torch file: {err}") from err
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("model"), dict):
        keys = sorted(checkpoint)[:10] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise InputError(f"ALBEF checkpoint {source!r} has no state dict under key 'model' (top level: {keys}).")
    return checkpoint["model"]


def official_layout(state_dict: dict[str, Tensor]) -> str:
    """``"pretrain"`` (``text_encoder.bert.*`` + MLM head ``text_encoder.cls.*``) or
    ``"retrieval"`` (a bare ``BertModel`` as ``text_encoder.*``)."""
    return "pretrain" if any(key.startswith("text_encoder.bert.") for key in state_dict) else "retrieval"


def interpolate_pos_embed(pos_embed: Tensor, grid: int) -> Tensor:
    """Resize ViT position embeddings ``(1, 1 + g*g, D)`` to ``(1, 1 + grid*grid, D)``: the CLS entry
    is kept, the g x g patch grid is resized bicubically (``align_corners=False``), as in ALBEF's
    ``models/vit.py``. A same-size grid is returned unchanged."""
    old = round((pos_embed.shape[1] - 1) ** 0.5)
    if old * old != pos_embed.shape[1] - 1:
        raise InputError(
            f"Position embeddings of shape {tuple(pos_embed.shape)} do not hold 1 + a square number of patches."
        )
    if old == grid:
        return pos_embed
    cls_token, patches = pos_embed[:, :1], pos_embed[:, 1:]
    patches = patches.reshape(1, old, old, -1).permute(0, 3, 1, 2)  # (1, D, g, g)
    patches = F.interpolate(patches.float(), size=(grid, grid), mode="bicubic", align_corners=False).to(pos_embed.dtype)
    return torch.cat([cls_token, patches.permute(0, 2, 3, 1).flatten(1, 2)], dim=1)


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_official_state_dict` did besides copying tensors."""

    ignored: tuple[str, ...]  # checkpoint keys dropped on purpose (momentum copies, queues, buffers)
    layout: str  # "pretrain" or "retrieval"
    pos_embed_grid: tuple[int, int]  # (checkpoint grid, model grid)


def load_official_state_dict(model: ALBEF, state_dict: dict[str, Tensor], source: str | Path) -> LoadReport:
    """Copy an official ALBEF/TCL state dict into ``model``.

    Retrieval-layout keys ``text_encoder.X`` are read as ``text_encoder.bert.X``; ignored keys
    (:data:`IGNORED_KEYS`) are dropped and reported; position embeddings are interpolated to the
    model's grid. Any other missing or unexpected key, or a shape that differs, raises
    :class:`InputError` listing them.
    """
    layout = official_layout(state_dict)
    renamed: dict[str, Tensor] = {}
    for key, value in state_dict.items():
        if layout == "retrieval" and key.startswith("text_encoder."):
            key = "text_encoder.bert." + key.removeprefix("text_encoder.")
        renamed[key] = value
    ignored = tuple(sorted(key for key in renamed if IGNORED_KEYS.search(key)))
    kept = {key: value for key, value in renamed.items() if key not in ignored}
    expected = model.state_dict()
    check_keys("albef", source, set(expected) - set(kept), set(kept) - set(expected))
    old_grid = round((kept["visual_encoder.pos_embed"].shape[1] - 1) ** 0.5)
    kept["visual_encoder.pos_embed"] = interpolate_pos_embed(kept["visual_encoder.pos_embed"], model.config.grid)
    wrong = [
        f"{key} {tuple(value.shape)} (expected {tuple(expected[key].shape)})"
        for key, value in kept.items()
        if value.shape != expected[key].shape
    ]
    if wrong:
        raise InputError(
            f"Checkpoint {str(source)!r} does not match model 'albef': {len(wrong)} shape(s) differ: {', '.join(wrong[:10])}."
        )
    model.load_state_dict(kept, strict=True)
    return LoadReport(ignored=ignored, layout=layout, pos_embed_grid=(old_grid, model.config.grid))

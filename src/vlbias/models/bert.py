"""Text-only BERT (Devlin et al., 2019) through transformers' ``BertForMaskedLM``: the
language-only reference against which the vision-language models' text side is compared
(FILL_MASK and TOKEN_STATES)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

from vlbias.errors import InputError
from vlbias.models.base import Capability, ModelAdapter, at_positions, gathered_rows
from vlbias.models.loading import from_pretrained_strict
from vlbias.models.vocab import tiny_tokenizer


class BertAdapter(ModelAdapter):
    """Masked-LM logits and last-layer token states of a text-only ``BertForMaskedLM``.

    BERT takes no image: :meth:`no_image` is ``None`` and the capability methods require
    ``pixel_values is None``. An image passed to it raises :class:`InputError` rather than
    being silently dropped, so a suite that means to condition on an image cannot quietly
    measure the text-only model instead.

    Example:
        >>> model = BertAdapter.tiny()
        >>> tokens = model.prepare_texts(["the [MASK] is cooking."])
        >>> model.fill_mask_logits(None, tokens).shape == (1, 7, len(model.tokenizer))
        True
    """

    name = "bert"
    capabilities = frozenset({Capability.FILL_MASK, Capability.TOKEN_STATES})
    text_only = True

    def __init__(self, model: BertForMaskedLM, tokenizer) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_text_length = model.config.max_position_embeddings

    def prepare_images(self, images) -> Tensor:
        raise InputError(f"Model {self.name!r} is text-only and takes no images; use pixel_values=None.")

    def no_image(self, batch_size: int) -> None:
        """BERT takes no image: "no image" is ``None``."""
        return None

    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        self._check_no_image(pixel_values)
        return self.model(**tokens).logits  # (B, T, V)

    def paired_fill_mask_logits(
        self,
        pixel_values: Tensor | None,
        tokens: dict[str, Tensor],
        image_rows: Tensor | None,
        text_rows: Tensor,
        positions: Tensor | None = None,
    ) -> Tensor:
        """:meth:`fill_mask_logits` of the gathered rows (see the base class), the MLM head
        (``BertForMaskedLM.cls``) at ``positions`` alone."""
        rows, pixel_values = gathered_rows(tokens, text_rows, pixel_values, image_rows)
        states = self.token_states(pixel_values, rows)
        return self.model.cls(states if positions is None else at_positions(states, positions))

    def token_states(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        self._check_no_image(pixel_values)
        return self.model.bert(**tokens).last_hidden_state  # (B, T, H)

    def direct_call(self, capability: Capability, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        """``BertForMaskedLM(...).logits`` for FILL_MASK, ``BertModel(...).last_hidden_state``
        (the MLM model's encoder) for TOKEN_STATES."""
        if capability is Capability.FILL_MASK:
            return self.model(
                input_ids=tokens["input_ids"],
                attention_mask=tokens["attention_mask"],
                token_type_ids=tokens["token_type_ids"],
            ).logits
        if capability is Capability.TOKEN_STATES:
            return self.model.bert(
                input_ids=tokens["input_ids"],
                attention_mask=tokens["attention_mask"],
                token_type_ids=tokens["token_type_ids"],
            ).last_hidden_state
        raise self._lacks(capability)

    def save_pretrained(self, directory: str | Path) -> None:
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> BertAdapter:
        """Load a hub id (e.g. ``bert-base-uncased``) or a local ``save_pretrained`` directory.
        The checkpoint must hold the MLM head: a bare ``BertModel`` (a sentence encoder such
        as MiniLM) is refused with the missing ``cls.predictions.*`` keys listed."""
        model = from_pretrained_strict(BertForMaskedLM, name_or_path, cls.name)
        return cls(model, AutoTokenizer.from_pretrained(str(name_or_path)))

    @classmethod
    def tiny(
        cls,
        seed: int = 0,
        tokenizer: object | None = None,
        hidden_size: int = 32,
        num_layers: int = 2,
        max_text_length: int = 64,
    ) -> BertAdapter:
        """A small random BERT (``tiny_tokenizer()`` unless ``tokenizer`` is given)."""
        tokenizer = tiny_tokenizer(tokenizer)
        config = tiny_bert_config(tokenizer, hidden_size, num_layers, max_text_length)
        torch.manual_seed(seed)
        return cls(BertForMaskedLM(config), tokenizer)

    def _check_no_image(self, pixel_values: Tensor | None) -> None:
        if pixel_values is not None:
            raise InputError(
                f"Model {self.name!r} is text-only but got pixel_values of shape {tuple(pixel_values.shape)}; "
                f"pass pixel_values=None (model.no_image(batch_size))."
            )


def tiny_bert_config(tokenizer, hidden_size: int, num_layers: int, max_text_length: int) -> BertConfig:
    """A small ``BertConfig`` sized to ``tokenizer`` (4 heads, feed-forward 2 x hidden) for the
    tiny text-only BERT adapters."""
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=max_text_length,
        pad_token_id=tokenizer.pad_token_id,
    )

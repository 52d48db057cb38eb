"""Text-only BERT (Devlin et al., 2019) through transformers' ``BertForMaskedLM``: the
language-only reference against which the vision-language models' text side is compared
(FILL_MASK and TOKEN_STATES)."""

from __future__ import annotations

import torch
from torch import Tensor
from transformers import BertConfig, BertForMaskedLM

from vlbias.models.base import Capability, at_positions, gathered_rows
from vlbias.models.pretrained import TextOnlyAdapter, tiny_layers, tiny_vocabulary_ids
from vlbias.models.vocab import tiny_tokenizer


class BertAdapter(TextOnlyAdapter):
    """Masked-LM logits and last-layer token states of a text-only ``BertForMaskedLM``.

    BERT takes no image (:class:`~vlbias.models.pretrained.TextOnlyAdapter`). :meth:`from_pretrained` loads a
    hub id (e.g. ``bert-base-uncased``) or a local ``save_pretrained`` directory; the checkpoint must hold the
    MLM head: a bare ``BertModel`` (a sentence encoder such as MiniLM) is refused with the missing
    ``cls.predictions.*`` keys listed.

    Example:
        >>> model = BertAdapter.tiny()
        >>> tokens = model.prepare_texts(["the [MASK] is cooking."])
        >>> model.fill_mask_logits(None, tokens).shape == (1, 7, len(model.tokenizer))
        True
    """

    name = "bert"
    capabilities = frozenset({Capability.FILL_MASK, Capability.TOKEN_STATES})
    model_class = BertForMaskedLM

    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        self.check_no_image(pixel_values)
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
        self.check_no_image(pixel_values)
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


def tiny_bert_config(tokenizer, hidden_size: int, num_layers: int, max_text_length: int) -> BertConfig:
    """A small ``BertConfig`` sized to ``tokenizer`` (4 heads, feed-forward 2 x hidden) for the
    tiny text-only BERT adapters."""
    return BertConfig(
        **tiny_layers(hidden_size, num_layers, intermediate_size=2 * hidden_size),
        **tiny_vocabulary_ids(tokenizer),
        max_position_embeddings=max_text_length,
    )

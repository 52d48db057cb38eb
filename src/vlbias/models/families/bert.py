"""Text-only BERT (Devlin et al., 2019) through transformers' ``BertForMaskedLM``: the
language-only reference against which the vision-language models' text side is compared
(FILL_MASK and TOKEN_STATES)."""

from __future__ import annotations

from dataclasses import dataclass

from jsonargparse.typing import PositiveInt
from torch import Tensor
from transformers import BertConfig, BertForMaskedLM

from vlbias.models.base import Capability, PairedRows, registered_capabilities
from vlbias.models.pretrained import TextOnlyAdapter, tiny_layers, tiny_vocabulary_ids
from vlbias.models.tiny_sizes import TinySizes


@dataclass(frozen=True)
class TinyBertSizes(TinySizes):
    """The sizes of a tiny text-only BERT (:class:`BertAdapter`, the sentence encoders).

    Args:
        max_text_length: most tokens a text may have (the position embeddings).
    """

    max_text_length: PositiveInt = 64


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
    capabilities = registered_capabilities(name)
    model_class = BertForMaskedLM
    tiny_sizes = TinyBertSizes()

    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        self.check_no_image(pixel_values)
        return self.model(**tokens).logits  # (B, T, V)

    def _paired_fill_mask(self, pixel_values: Tensor | None, tokens: dict[str, Tensor], rows: PairedRows) -> Tensor:
        """:meth:`fill_mask_logits` of the gathered rows (see the base class), the MLM head
        (``BertForMaskedLM.cls``) at ``positions`` alone."""
        texts, pixel_values = rows.gather(tokens, pixel_values)
        return self.model.cls(rows.at_positions(self.token_states(pixel_values, texts)))

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
    def _tiny(cls, tokenizer, sizes: TinyBertSizes) -> BertAdapter:
        """A small random BERT of ``num_layers`` layers (:func:`tiny_bert_config`)."""
        return cls(BertForMaskedLM(tiny_bert_config(tokenizer, sizes)), tokenizer)


def tiny_bert_config(tokenizer, sizes: TinyBertSizes) -> BertConfig:
    """A small ``BertConfig`` of ``sizes`` over ``tokenizer``'s vocabulary (4 heads, feed-forward 2 x hidden) for
    the tiny text-only BERT adapters."""
    return BertConfig(
        **tiny_layers(sizes, intermediate_size=2 * sizes.hidden_size),
        **tiny_vocabulary_ids(tokenizer),
        max_position_embeddings=sizes.max_text_length,
    )

"""A byte-level tokenizer that needs no hub and no training, for the tiny random chat models.

Every UTF-8 byte is one token (GPT-2's byte-to-character alphabet, no merges), after the family's special tokens,
which keep their own ids: any text is encoded, nothing is unknown, and the ids depend on nothing but the list of
special tokens. Real checkpoints bring their own tokenizer; this one only lets the tests and ``--tiny`` run every
chat family offline, with the processor and chat template built around it (:mod:`vlbias.models.families.chat_tiny`).

Example:
    >>> tokenizer = byte_level_tokenizer(["<pad>", "<image>"], pad_token="<pad>")
    >>> tokenizer("<image>hi")["input_ids"], len(tokenizer)
    ([1, 73, 74], 258)
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast


def byte_level_tokenizer(special_tokens: Sequence[str], **roles: object) -> PreTrainedTokenizerFast:
    """A fast tokenizer whose vocabulary is ``special_tokens`` (ids 0, 1, ...) then the 256 byte characters.

    Args:
        special_tokens: Tokens never split (pad, bos, eos, image placeholders, chat markers).
        roles: ``PreTrainedTokenizerFast`` keyword arguments naming them (``pad_token="<pad>"``,
            ``extra_special_tokens={"image_token": "<image>"}``).
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocabulary = {token: index for index, token in enumerate([*special_tokens, *alphabet])}
    tokenizer = Tokenizer(models.BPE(vocab=vocabulary, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(special_tokens))
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **roles)

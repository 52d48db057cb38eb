"""Tokenizers that need no hub: a WordPiece tokenizer from a plain word list."""

from __future__ import annotations

from collections.abc import Iterable

from transformers import BertTokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PUNCTUATION = tuple(".,'!?-")


def word_tokenizer(words: Iterable[str]) -> BertTokenizer:
    """An uncased BERT-style tokenizer whose vocabulary is exactly ``words`` (whole words,
    lower-cased), the BERT special tokens and basic punctuation. Other words map to ``[UNK]``.

    Example:
        >>> tokenizer = word_tokenizer(["a", "man", "is", "cooking"])
        >>> tokenizer.convert_ids_to_tokens(tokenizer("A man is sewing")["input_ids"])
        ['[CLS]', 'a', 'man', 'is', '[UNK]', '[SEP]']
    """
    vocabulary = list(SPECIAL_TOKENS) + sorted(set(PUNCTUATION) | {w.lower() for w in words} - set(SPECIAL_TOKENS))
    return BertTokenizer(vocab={token: index for index, token in enumerate(vocabulary)}, do_lower_case=True)


def tiny_tokenizer(tokenizer: BertTokenizer | None = None) -> BertTokenizer:
    """``tokenizer``, or, when it is None, the tiny models' default: a word tokenizer over
    BiasWorld's vocabulary (every word of its captions and probe phrases)."""
    if tokenizer is not None:
        return tokenizer
    from vlbias.data.biasworld import vocabulary

    return word_tokenizer(vocabulary())

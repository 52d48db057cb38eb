"""Tokenizers that need no hub: a WordPiece tokenizer from a plain word list.

The tiny random models take their tokenizer from the caller; without one they use
:func:`tiny_tokenizer`'s default word list, the package resource ``tiny_vocabulary.txt``
(the words of the synthetic BiasWorld's captions and probe phrases, so that tiny models read
BiasWorld without unknown words; ``tests/test_biasworld.py`` checks that the two agree). No
adapter imports a data set: a caller with other data gives its words
(``tokenizer=word_tokenizer(words)``).
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterable

from transformers import BertTokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PUNCTUATION = tuple(".,'!?-")
TINY_VOCABULARY_FILE = "tiny_vocabulary.txt"


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


def tiny_vocabulary() -> list[str]:
    """The tiny models' default words: one per line of the resource ``tiny_vocabulary.txt``."""
    text = (importlib.resources.files("vlbias") / "resources" / TINY_VOCABULARY_FILE).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def tiny_tokenizer(tokenizer: BertTokenizer | None = None) -> BertTokenizer:
    """``tokenizer``, or, when it is None, a word tokenizer over :func:`tiny_vocabulary`."""
    return tokenizer if tokenizer is not None else word_tokenizer(tiny_vocabulary())

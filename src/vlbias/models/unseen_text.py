"""Texts a model cannot see as written: one check, given an adapter's tokenizer and texts, used by every suite
that feeds text to a model.

* ``empty``: the text is empty or whitespace only, or tokenizes to no token at all;
* ``unknown``: every token of the text is the tokenizer's unknown token (``[UNK]``): the model sees one
  placeholder, whatever the word was;
* ``truncated``: with its special tokens the text is longer than the model's maximum, so the model reads its
  first ``max_length`` tokens only (``ModelAdapter.prepare_texts`` truncates it).

The first two carry no information about the text, and suites skip them with the reason; a truncated text is
still measured on what the model reads, and suites note and count it (a suite may skip it where the cut removes
what it measures, e.g. a contextual word past the cut, or a mask token past the cut: :func:`unseen_masked`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EMPTY, UNKNOWN, TRUNCATED = "empty", "unknown", "truncated"


@dataclass(frozen=True)
class UnseenText:
    """Why the model cannot see a text as written: ``kind`` is ``empty``, ``unknown`` or ``truncated``;
    ``skip``: the model's output for it says nothing about the text (``empty``, ``unknown``), so it is skipped
    rather than measured and noted."""

    kind: str
    reason: str
    skip: bool = False


def unseen_by(adapter, texts: Sequence[str]) -> list[UnseenText | None]:
    """:func:`unseen_texts` with ``adapter``'s tokenizer and maximum length; an adapter without a tokenizer (a
    test double that embeds raw strings) gets the ``empty`` check alone."""
    return unseen_texts(getattr(adapter, "tokenizer", None), texts, getattr(adapter, "max_text_length", None))


def unseen_texts(tokenizer, texts: Sequence[str], max_length: int | None) -> list[UnseenText | None]:
    """For each of ``texts``, why ``tokenizer`` and a model reading ``max_length`` tokens cannot see it as
    written, or ``None`` where it can (module docstring). A tokenizer without an unknown token never reports
    ``unknown``; without a tokenizer (``None``) only ``empty`` (blank) texts are reported, and without
    ``max_length`` no text is ``truncated``.

    Example:
        >>> from vlbias.models.vocab import word_tokenizer
        >>> tokenizer = word_tokenizer(["a", "man"])
        >>> [None if p is None else p.kind for p in unseen_texts(tokenizer, ["a man", " ", "zebra", "a man a man"], 5)]
        [None, 'empty', 'unknown', 'truncated']
    """
    texts = list(texts)
    if not texts:
        return []
    if tokenizer is None:
        pieces, specials, unknown = [[0] for _ in texts], 0, None  # no tokens to look at: blank texts only
        max_length = None
    else:
        pieces = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        specials, unknown = tokenizer.num_special_tokens_to_add(pair=False), tokenizer.unk_token_id
    problems: list[UnseenText | None] = []
    for text, ids in zip(texts, pieces, strict=True):
        if not text.strip() or not ids:
            problems.append(UnseenText(EMPTY, f"empty text: {text!r} holds no token the model could read", skip=True))
        elif unknown is not None and all(i == unknown for i in ids):
            problems.append(
                UnseenText(
                    UNKNOWN,
                    f"every token of {text!r} is the unknown token {tokenizer.unk_token!r}: the model sees no word of it",
                    skip=True,
                )
            )
        elif max_length is not None and len(ids) + specials > max_length:
            problems.append(
                UnseenText(
                    TRUNCATED,
                    f"{len(ids) + specials} tokens, over the model's maximum of {max_length}: measured on its first "
                    f"{max_length} tokens ({len(ids) + specials - max_length} cut)",
                )
            )
        else:
            problems.append(None)
    return problems


def unseen_masked(adapter, texts: Sequence[str]) -> list[UnseenText | None]:
    """:func:`unseen_by` for texts a masked-word probe reads at their mask tokens: a truncated text whose cut
    removes one of its mask tokens is skipped too (``truncated``, ``skip``), since the probe then has nothing to
    read; a truncated text that keeps all its masks is measured (and noted) as any other.

    Example:
        >>> from types import SimpleNamespace
        >>> from vlbias.models.vocab import word_tokenizer
        >>> model = SimpleNamespace(tokenizer=word_tokenizer(["a", "man", "is"]), max_text_length=5)
        >>> [(p.kind, p.skip) for p in unseen_masked(model, ["a [MASK] is a man", "a man is a [MASK]"])]
        [('truncated', False), ('truncated', True)]
    """
    texts = list(texts)
    problems = unseen_by(adapter, texts)
    cut = [i for i, problem in enumerate(problems) if problem is not None and problem.kind == TRUNCATED]
    if not cut:
        return problems
    tokenizer, mask = adapter.tokenizer, adapter.tokenizer.mask_token_id
    whole = tokenizer([texts[i] for i in cut])["input_ids"]
    read = tokenizer([texts[i] for i in cut], truncation=True, max_length=adapter.max_text_length)["input_ids"]
    for i, ids, kept in zip(cut, whole, read, strict=True):
        if kept.count(mask) < ids.count(mask):
            problems[i] = UnseenText(
                TRUNCATED,
                f"{problems[i].reason}; {tokenizer.mask_token} is past the cut: nothing is measured",
                skip=True,
            )
    return problems

"""Text counterfactuals: swap bias-concept words (CounterBias, Zhang et al., 2022, Sec. 3).

"We manually replace the bias concept word in factual text L_f, e.g. gendered word *woman* is
replaced by *man*. The generated counterfactual text is denoted as L_cf." FairVLP (Sec. 5.1)
makes its training counterfactuals the same way. The pairs live in an editable YAML lexicon
shipped with the package (``vlbias/resources/gender_swap_lexicon.yaml``, read by
:class:`~vlbias.data.lexicon.WordPairs`); another file with the same layout gives another bias axis.

Swaps are whole-word and case-preserving: ``"Woman's"`` -> ``"Man's"``, ``"HE'LL"`` ->
``"SHE'LL"``, and ``"humane"`` or ``"shepherd"`` stay as they are. A word is a maximal run of
letters, so an apostrophe ends it and ``'s``/``'ll`` come along unchanged.

Example:
    >>> lexicon = SwapLexicon.default()
    >>> lexicon.swap("The Woman's dog thinks he'll win, humanely.")
    "The Man's dog thinks she'll win, humanely."
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from vlbias.data.lexicon import WORD, WordPairs
from vlbias.errors import InputError

MASK = "{mask}"  # the placeholder of the mask token in the templates below

#: The four caption templates of CounterBias Table 1 (Sw/O, Sw/, Pw/O, Pw/), with ``{gender}``
#: for the bias concept word and ``{mask}`` for the tokenizer's mask token.
CAPTION_TEMPLATES: dict[str, str] = {
    "Sw/O": "The {gender} is {mask}",  # sentence without specification
    "Sw/": "The {gender} in the photo is {mask}",  # sentence with specification
    "Pw/O": "A {gender} who is {mask}",  # phrase without specification
    "Pw/": "A photo of a {gender} who is {mask}",  # phrase with specification
}
#: The bias prompt of Eq. 2: the masked word is the bias concept seen in the image.
BIAS_PROMPT = "a {mask} is in the picture"


def fill_template(template: str, mask_token: str, **words: str) -> str:
    """``template`` with ``{mask}`` set to ``mask_token`` and the other fields to ``words``.

    Example:
        >>> fill_template(CAPTION_TEMPLATES["Sw/O"], "[MASK]", gender="woman")
        'The woman is [MASK]'
    """
    return template.format(mask=mask_token, **words)


def _match_case(word: str, model: str) -> str:
    """``word`` in the case pattern of ``model`` (lower, UPPER, Title, or as given)."""
    if model.isupper() and len(model) > 1:
        return word.upper()
    if model[0].isupper():
        return word[0].upper() + word[1:]
    return word


class SwapLexicon:
    """Pairs of bias-concept words; :meth:`swap` replaces each with its counterpart.

    Args:
        pairs: ``(a, b)`` word pairs (lower case; :class:`~vlbias.data.lexicon.WordPairs` or checked as
            one); ``a`` and ``b`` swap both ways. A word in several pairs goes where its first pair sends it.

    Example:
        >>> SwapLexicon([("man", "woman")]).swap("A MAN and a Woman")
        'A WOMAN and a Man'
    """

    def __init__(self, pairs: Iterable[tuple[str, str]] | WordPairs) -> None:
        mapping: dict[str, str] = {}
        for a, b in WordPairs.of(pairs).pairs:
            mapping.setdefault(a, b)
            mapping.setdefault(b, a)
        self.mapping: Mapping[str, str] = mapping

    @classmethod
    def from_yaml(cls, path: str | Path) -> SwapLexicon:
        """Read a lexicon file: a mapping with a ``pairs`` list of ``[a, b]`` entries."""
        return cls(WordPairs.load(path))

    @classmethod
    def default(cls) -> SwapLexicon:
        """The gender lexicon shipped with vlbias (``vlbias/resources/gender_swap_lexicon.yaml``)."""
        return cls(WordPairs.load())

    def counterpart(self, word: str) -> str:
        """The word ``word`` swaps to (case preserved), or :class:`InputError` if it has none."""
        swapped = self.mapping.get(word.lower())
        if swapped is None:
            raise InputError(f"Word {word!r} is not in the swap lexicon; add a pair holding it.")
        return _match_case(swapped, word)

    def swap(self, text: str) -> str:
        """``text`` with every lexicon word replaced by its counterpart (L_f -> L_cf)."""

        def replace(match: re.Match[str]) -> str:
            word = match.group(0)
            swapped = self.mapping.get(word.lower())
            return word if swapped is None else _match_case(swapped, word)

        return WORD.sub(replace, text)

    def n_swaps(self, text: str) -> int:
        """How many words of ``text`` :meth:`swap` replaces (0: the text has no bias concept)."""
        return sum(1 for match in WORD.finditer(text) if match.group(0).lower() in self.mapping)

"""Stimuli of the retrieval ranking-bias suite: which gender an image's own captions name, and gender-neutral
queries made from captions.

**Gallery annotation**, the common practice on COCO and Flickr30K (Zhao et al., 2017, "Men Also Like
Shopping"; Hendricks et al., 2018, "Women Also Snowboard"; Wang et al., 2021, for Bias@K): an image is
``man`` when its captions mention a men's word and no women's word, ``woman`` the other way round, ``both``
when they mention both and ``neither`` when they mention none (:func:`annotate`). Words match whole and
case-insensitively; a word is a maximal run of letters (:data:`vlbias.data.lexicon.WORD`), so "woman's" holds
"woman".

**Gender words** are the pairs of a swap lexicon (:class:`~vlbias.data.lexicon.WordPairs`, the layout
:mod:`vlbias.counterfactual.text` swaps with), ``pairs: [[men's word, women's word], ...]``, read in that order
(:class:`GenderWords`); the default is the lexicon shipped with the package
(``vlbias/resources/gender_swap_lexicon.yaml``), whose pairs all list the men's word first ("his"/"him" pair
with "her").

**Queries from captions** (:func:`vlbias.suites.retrieval_bias.caption_queries`): a caption that mentions a gender word is neutralised
with a :class:`~vlbias.counterfactual.neutralise.NeutralLexicon` ("A man riding a horse." -> "A person riding
a horse."); it becomes a query only when the result mentions no gender word and no ambiguous word of the
lexicon ("her": "their" or "them"), otherwise it is skipped with the reason. Captions that name no gender
are not queries: the queries are the captions about a man or a woman, with the gender taken out. A query
text repeated within its group is kept once (a repeat ranks the gallery the same way) and counted.

Example:
    >>> words = GenderWords.default()
    >>> annotate(["A man and his dog.", "Someone walking."], words), annotate(["A dog."], words)
    ('man', 'neither')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vlbias.data.lexicon import WordPairs, text_words
from vlbias.errors import InputError

GENDERS: tuple[str, str] = ("man", "woman")
LABELS: tuple[str, ...] = (*GENDERS, "both", "neither")  # what :func:`annotate` says of an image


@dataclass(frozen=True)
class GenderWords:
    """Men's and women's words (lower case); ``source`` names the file they came from."""

    man: frozenset[str]
    woman: frozenset[str]
    source: str = "<in memory>"

    @classmethod
    def default(cls) -> GenderWords:
        """The pairs of the swap lexicon shipped with the package."""
        return cls.load()

    @classmethod
    def load(cls, path: str | Path | None = None) -> GenderWords:
        """The pairs ``[men's word, women's word]`` of the swap lexicon at ``path``, or of the shipped one; a word
        on both sides is refused."""
        pairs = WordPairs.load(path)
        man, woman = frozenset(a for a, _ in pairs.pairs), frozenset(b for _, b in pairs.pairs)
        both = sorted(man & woman)
        if both:
            raise InputError(f"Swap lexicon {pairs.source!r}: {both} listed as both men's and women's words")
        return cls(man, woman, pairs.source)

    def found(self, text: str) -> list[str]:
        """The gender words of ``text``, lower-cased, in order."""
        return [word for word in text_words(text) if word in self.man or word in self.woman]

    def mentioned(self, text: str) -> tuple[str, ...]:
        """The genders (:data:`GENDERS`, in that order) whose words ``text`` holds."""
        found = set(text_words(text))
        return tuple(gender for gender, listed in zip(GENDERS, (self.man, self.woman)) if found & listed)


def annotate(captions: Sequence[str], words: GenderWords) -> str:
    """``"man"``, ``"woman"``, ``"both"`` or ``"neither"``: which genders ``captions`` name (module docstring)."""
    genders = {gender for caption in captions for gender in words.mentioned(caption)}
    if len(genders) == 2:
        return "both"
    return genders.pop() if genders else "neither"


@dataclass(frozen=True)
class Query:
    """A gender-neutral query: its ``text``, the ``group`` it is reported in, and its ``source`` (the caption it
    was made from, or what it asks for)."""

    text: str
    group: str
    source: str

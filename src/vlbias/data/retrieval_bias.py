"""Stimuli of the retrieval ranking-bias suite: which gender an image's own captions name, and gender-neutral
queries made from captions.

**Gallery annotation**, the common practice on COCO and Flickr30K (Zhao et al., 2017, "Men Also Like
Shopping"; Hendricks et al., 2018, "Women Also Snowboard"; Wang et al., 2021, for Bias@K): an image is
``man`` when its captions mention a men's word and no women's word, ``woman`` the other way round, ``both``
when they mention both and ``neither`` when they mention none (:func:`annotate`). Words match whole and
case-insensitively; a word is a maximal run of letters, so "woman's" holds "woman".

**Gender words** are the pairs of a swap lexicon in :mod:`vlbias.counterfactual.text`'s YAML layout,
``pairs: [[men's word, women's word], ...]``, read in that order (:class:`GenderWords`); the default is the
lexicon shipped with the package (``vlbias/resources/gender_swap_lexicon.yaml``), whose pairs all list the
men's word first ("his"/"him" pair with "her").

**Queries from captions** (:func:`caption_queries`): a caption that mentions a gender word is neutralised
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

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from vlbias.errors import InputError

if TYPE_CHECKING:
    from vlbias.counterfactual.neutralise import NeutralLexicon

GENDERS: tuple[str, str] = ("man", "woman")
LABELS: tuple[str, ...] = (*GENDERS, "both", "neither")  # what :func:`annotate` says of an image
DEFAULT_WORDS = "gender_swap_lexicon.yaml"

_WORD = re.compile(r"[^\W\d_]+")  # a maximal run of letters, as in vlbias.counterfactual.text


@dataclass(frozen=True)
class GenderWords:
    """Men's and women's words (lower case); ``source`` names the file they came from."""

    man: frozenset[str]
    woman: frozenset[str]
    source: str = "<in memory>"

    @classmethod
    def default(cls) -> GenderWords:
        """The pairs of the swap lexicon shipped with the package."""
        text = resources.files("vlbias.resources").joinpath(DEFAULT_WORDS).read_text(encoding="utf-8")
        return cls._from_text(text, f"vlbias/resources/{DEFAULT_WORDS}")

    @classmethod
    def load(cls, path: str | Path | None = None) -> GenderWords:
        """The pairs ``[men's word, women's word]`` of the swap lexicon at ``path``, or :meth:`default`."""
        if path is None:
            return cls.default()
        path = Path(path)
        if not path.is_file():
            raise InputError(f"Gender word file {str(path)!r} does not exist.")
        return cls._from_text(path.read_text(encoding="utf-8"), str(path))

    @classmethod
    def _from_text(cls, text: str, source: str) -> GenderWords:
        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise InputError(f"Gender word file {source!r} is not valid YAML: {err}") from err
        pairs = spec.get("pairs") if isinstance(spec, dict) else None
        if not isinstance(pairs, list) or not pairs:
            raise InputError(f"Gender word file {source!r}: expected a mapping with a non-empty `pairs` list.")
        for index, pair in enumerate(pairs):
            if not (isinstance(pair, list) and len(pair) == 2 and all(_is_word(word) for word in pair)):
                raise InputError(
                    f"Gender word file {source!r}: expected entry {index} of `pairs` to be [men's word, women's word] "
                    f"in lower-case letters but got {pair!r}"
                )
        man, woman = frozenset(pair[0] for pair in pairs), frozenset(pair[1] for pair in pairs)
        both = sorted(man & woman)
        if both:
            raise InputError(f"Gender word file {source!r}: {both} listed as both men's and women's words")
        return cls(man, woman, source)

    def found(self, text: str) -> list[str]:
        """The gender words of ``text``, lower-cased, in order."""
        return [word for word in _words(text) if word in self.man or word in self.woman]

    def mentioned(self, text: str) -> tuple[str, ...]:
        """The genders (:data:`GENDERS`, in that order) whose words ``text`` holds."""
        words = set(_words(text))
        return tuple(gender for gender, listed in zip(GENDERS, (self.man, self.woman)) if words & listed)


def _is_word(word: object) -> bool:
    return isinstance(word, str) and _WORD.fullmatch(word) is not None and word == word.lower()


def _words(text: str) -> list[str]:
    return [match.group(0).lower() for match in _WORD.finditer(text)]


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


def caption_queries(
    captions: Sequence[str], groups: Sequence[str], lexicon: NeutralLexicon, words: GenderWords
) -> tuple[list[Query], list[dict[str, str]], int]:
    """Neutralised queries from the ``captions`` that name a gender, caption ``i`` reported in ``groups[i]``
    (module docstring): the queries, the skipped captions ``{"item", "reason"}``, and how many repeats were
    dropped."""
    queries: dict[tuple[str, str], Query] = {}
    skipped: list[dict[str, str]] = []
    repeats = 0
    for caption, group in zip(captions, groups, strict=True):
        if not words.found(caption):
            continue
        neutral = lexicon.neutralise(caption)
        left = words.found(neutral) + [word for word in _words(neutral) if word in lexicon.ambiguous]
        if left:
            reason = (
                f"neutralised caption {neutral!r} still holds {left[0]!r}, which the neutral lexicon "
                f"{lexicon.source!r} has no single neutral form for"
            )
            skipped.append({"item": caption, "reason": reason})
        elif (group, neutral) in queries:
            repeats += 1
        else:
            queries[group, neutral] = Query(neutral, group, caption)
    return list(queries.values()), skipped, repeats

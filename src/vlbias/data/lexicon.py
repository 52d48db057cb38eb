"""Word lexicons in YAML, read in one place: the gender swap lexicon's word pairs (CounterBias and FairVLP swap
them, :mod:`vlbias.counterfactual.text`; the retrieval suite reads them as men's and women's words,
:mod:`vlbias.data.retrieval_bias`), and the reading of any lexicon file (the neutral lexicon,
:mod:`vlbias.counterfactual.neutralise`).

A *word* is a maximal run of letters (:data:`WORD`), so an apostrophe ends it: "woman's" holds "woman".

Example:
    >>> WordPairs.load().pairs[0]
    ('man', 'woman')
    >>> text_words("The Woman's dog.")
    ['the', 'woman', 's', 'dog']
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from vlbias.errors import InputError

#: The word-pair lexicon shipped with the package: gender words, ``[men's word, women's word]`` per pair.
DEFAULT_PAIRS = "gender_swap_lexicon.yaml"
WORD = re.compile(r"[^\W\d_]+")  # a maximal run of letters


def text_words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, in order."""
    return [match.group(0).lower() for match in WORD.finditer(text)]


def read_lexicon(path: str | Path | None, default: str, kind: str) -> tuple[object, str]:
    """The YAML content of the lexicon file at ``path`` (or, when ``None``, of the package resource ``default``)
    and its name for messages (``vlbias/resources/<default>`` or the path). A missing file or invalid YAML is
    refused naming ``kind`` (``"Swap lexicon"``) and the file."""
    if path is None:
        text = (resources.files("vlbias") / "resources" / default).read_text(encoding="utf-8")
        source = f"vlbias/resources/{default}"
    else:
        if not Path(path).is_file():
            raise InputError(f"{kind} {str(path)!r} does not exist.")
        text, source = Path(path).read_text(encoding="utf-8"), str(path)
    try:
        return yaml.safe_load(text), source
    except yaml.YAMLError as err:
        raise InputError(f"{kind} {source!r} is not valid YAML: {err}") from err


@dataclass(frozen=True)
class WordPairs:
    """Pairs ``(a, b)`` of different lower-case words, in the order of their file (``source``); refused entry by
    entry when anything else is given. A word may stand in several pairs."""

    pairs: tuple[tuple[str, str], ...]
    source: str = "<in memory>"

    def __post_init__(self) -> None:
        for index, pair in enumerate(self.pairs):
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(w, str) for w in pair)):
                raise InputError(f"{self._where(index)} to be a pair of words [a, b] but got {pair!r}.")
            for word in pair:
                if not WORD.fullmatch(word) or word != word.lower():
                    raise InputError(f"{self._where(index)} to hold lower-case words of letters only but got {word!r}.")
            if pair[0] == pair[1]:
                raise InputError(f"{self._where(index)} to pair two different words but got {pair!r}.")
        object.__setattr__(self, "pairs", tuple((a, b) for a, b in self.pairs))

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]] | WordPairs) -> WordPairs:
        """``pairs`` as :class:`WordPairs` (checked, unless they already are)."""
        return pairs if isinstance(pairs, WordPairs) else cls(tuple(pairs))

    @classmethod
    def load(cls, path: str | Path | None = None) -> WordPairs:
        """The ``pairs: [[a, b], ...]`` of the lexicon file at ``path``, or of :data:`DEFAULT_PAIRS`."""
        content, source = read_lexicon(path, DEFAULT_PAIRS, "Swap lexicon")
        pairs = content.get("pairs") if isinstance(content, dict) else None
        if not isinstance(pairs, list) or not pairs:
            raise InputError(
                f"Swap lexicon {source!r}: expected a mapping with a non-empty `pairs` list of [a, b] entries."
            )
        return cls(tuple(pairs), source)

    def _where(self, index: int) -> str:
        return f"Swap lexicon {self.source!r}: expected entry {index} of `pairs`"

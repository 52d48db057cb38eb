"""Neutralised captions for VLStereoSet's lmss and vlss (Zhou et al., 2022, Sec. 3.5, Fig. 2).

"S'_s and S'_a represent modified captions with 'neutralized' context, where the target term in the
context has been either removed or replaced by a neutral term": *My sister is caring* becomes
*My sibling is caring*. The paper neutralised by hand; here an editable YAML lexicon
(``vlbias/resources/neutral_lexicon.yaml``, or your own file with the same layout) lists the
replacements and the words with no single neutral form. An item is neutralised only when its target
term is listed and the result contains neither the target term nor an ambiguous word; every other
item gets a reason instead of a guess (:meth:`NeutralLexicon.neutralise_item`).

Matching is whole-word and case-insensitive, longest phrase first; a replacement keeps the capital
first letter of what it replaces.

Example:
    >>> lexicon = NeutralLexicon.default()
    >>> lexicon.neutralise("She thinks her Sister was rude.")
    'The person thinks her Sibling was rude.'
    >>> lexicon.neutralise_item("sister", ["My sister is caring.", "My sister is rude."])
    (['My sibling is caring.', 'My sibling is rude.'], None)
    >>> lexicon.neutralise_item("Muslim", ["Muslims pray.", "Muslims dance."])[1]
    "target term 'Muslim' is not in the neutral lexicon"
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vlbias.data.lexicon import read_lexicon
from vlbias.errors import InputError

DEFAULT_LEXICON = "neutral_lexicon.yaml"


def _normal(phrase: str) -> str:
    return " ".join(phrase.lower().split())


def _phrase_pattern(phrases: Sequence[str]) -> re.Pattern[str]:
    """Whole-word, case-insensitive alternation of ``phrases``, longest first; any run of
    whitespace matches the space between two words."""
    ordered = sorted(phrases, key=len, reverse=True)
    body = "|".join(r"\s+".join(re.escape(word) for word in phrase.split()) for phrase in ordered)
    return re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class NeutralLexicon:
    """Replacements ``{phrase: neutral phrase}`` and ``ambiguous`` words; ``source`` names the file."""

    replace: dict[str, str]
    ambiguous: frozenset[str] = frozenset()
    source: str = "<in memory>"
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        replace = {_normal(key): value.strip() for key, value in self.replace.items()}
        object.__setattr__(self, "replace", replace)
        object.__setattr__(self, "ambiguous", frozenset(_normal(word) for word in self.ambiguous))
        object.__setattr__(self, "_pattern", _phrase_pattern(list(replace)) if replace else None)

    @classmethod
    def default(cls) -> NeutralLexicon:
        """The lexicon shipped with the package."""
        return cls.load()

    @classmethod
    def load(cls, path: str | Path | None = None) -> NeutralLexicon:
        """The lexicon at ``path`` (YAML with ``replace`` and optional ``ambiguous``), or the default."""
        spec, source = read_lexicon(path, DEFAULT_LEXICON, "Neutral lexicon")
        if not isinstance(spec, dict) or not isinstance(spec.get("replace"), dict) or not spec["replace"]:
            raise InputError(f"Neutral lexicon {source!r}: expected a mapping with a non-empty `replace` mapping.")
        bad = {
            k: v for k, v in spec["replace"].items() if not (isinstance(k, str) and isinstance(v, str) and k.strip())
        }
        if bad:
            raise InputError(f"Neutral lexicon {source!r}: `replace` entries must map text to text; got {bad!r}.")
        ambiguous = spec.get("ambiguous") or []
        if not (isinstance(ambiguous, list) and all(isinstance(word, str) for word in ambiguous)):
            raise InputError(f"Neutral lexicon {source!r}: `ambiguous` must be a list of words; got {ambiguous!r}.")
        return cls(spec["replace"], frozenset(ambiguous), source)

    def neutralise(self, text: str) -> str:
        """``text`` with every listed phrase replaced by its neutral form."""

        def substitute(match: re.Match[str]) -> str:
            found, neutral = match.group(0), self.replace[_normal(match.group(0))]
            return neutral[:1].upper() + neutral[1:] if found[:1].isupper() else neutral

        return self._pattern.sub(substitute, text)

    def neutralise_item(self, target: str, captions: Sequence[str]) -> tuple[list[str] | None, str | None]:
        """Neutralised ``captions`` of an item whose target term is ``target``, or ``(None, reason)``."""
        if _normal(target) not in self.replace:
            return None, f"target term {target!r} is not in the neutral lexicon"
        neutral = [self.neutralise(caption) for caption in captions]
        leftovers = _phrase_pattern([_normal(target), *self.ambiguous])
        for before, after in zip(captions, neutral):
            if after == before:
                return None, f"caption {before!r} contains no word of the neutral lexicon"
            left = leftovers.search(after)
            if left is not None:
                return (
                    None,
                    f"neutralised caption {after!r} still contains {left.group(0)!r}, which has no single neutral form",
                )
        return neutral, None

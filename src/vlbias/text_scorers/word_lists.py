r"""Word lists of warmth and competence, the two dimensions of the Stereotype Content Model (Fiske, Cuddy, Glick &
Xu, 2002), each the union of two facets: warmth = sociability + morality, competence = ability + assertiveness
(Nicolas, Bai & Fiske, 2021, "Comprehensive stereotype content dictionaries using a semi-automated method",
European Journal of Social Psychology 51(1), 178-196, doi:10.1002/ejsp.2724). The shipped lists are that paper's
seed dictionaries (``vlbias/resources/stereotype_content_words.yaml`` says exactly where from); option ``path``
gives others in the same layout.

A text's words are its maximal runs of letters, joined by single hyphens ("self-reliant"), lower-cased. With
:math:`h_d` and :math:`l_d` the numbers of its words in dimension :math:`d`'s high and low lists and :math:`n` its
number of words, its score on :math:`d` is

.. math::
    s_d = \frac{h_d - l_d}{n} \in [-1, 1],

the share of its words that say "warm" (or "competent") minus the share that say "cold" ("incompetent"), as
dictionary scores count the words of each direction (Nicolas et al., 2021, Sec. 4). Negation is not read ("not
friendly" counts as friendly). A text of no word is not scored (the suite leaves empty generations out).

Example:
    >>> scorer = WordListScorer(WordListOptions())
    >>> scorer.score_names
    ('warmth', 'competence')
    >>> scorer.score(["A friendly, kind and clumsy nurse."]).tolist()  # 6 words: 2 warm, 1 incompetent
    [[0.3333333333333333, -0.16666666666666666]]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.data.lexicon import read_lexicon
from vlbias.errors import InputError
from vlbias.text_scorers.base import TextScorer
from vlbias.text_scorers.options import WordListOptions

DEFAULT_LISTS = "stereotype_content_words.yaml"
WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")  # letters, hyphen-joined runs kept whole
DIRECTIONS = ("high", "low")


def words(text: str) -> list[str]:
    """The words of ``text`` (module docstring), lower-cased, in order."""
    return [match.group(0).lower() for match in WORD.finditer(text)]


class WordListScorer(TextScorer):
    """One score per dimension of the lists (module docstring): ``(high - low) / words``."""

    def __init__(self, options: WordListOptions) -> None:
        content, self.source = read_lexicon(options.path, DEFAULT_LISTS, "Word lists")
        self.lists = _checked(content, self.source)  # dimension -> (high words, low words)
        self.score_names = tuple(self.lists)

    def score(self, texts: Sequence[str]) -> Tensor:
        rows = []
        for text in texts:
            found = words(text)
            row = []
            for high, low in self.lists.values():
                signed = sum((word in high) - (word in low) for word in found)
                row.append(signed / len(found) if found else float("nan"))
            rows.append(row)
        return torch.tensor(rows, dtype=torch.float64).reshape(len(texts), len(self.score_names))

    @property
    def config(self) -> dict[str, object]:
        return {"lists": self.source, "words": {d: [len(high), len(low)] for d, (high, low) in self.lists.items()}}


def _checked(content: object, source: str) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """``{dimension: (high words, low words)}`` of a lists file's content (the shipped file's layout), each facet's
    words joined; anything else refused naming the file and the place."""
    dimensions = content.get("dimensions") if isinstance(content, dict) else None
    if not isinstance(dimensions, dict) or not dimensions:
        raise InputError(f"Word lists {source!r}: expected a mapping `dimensions: {{name: {{facet: {{high: [...], "
                         f"low: [...]}}}}}}` but got {content!r:.80}.")  # fmt: skip
    lists = {}
    for dimension, facets in dimensions.items():
        where = f"Word lists {source!r}, dimension {dimension!r}"
        if not isinstance(dimension, str) or "/" in dimension or not isinstance(facets, dict) or not facets:
            raise InputError(f"{where}: expected a name without '/' and a mapping of facets but got {facets!r:.80}.")
        high, low = set(), set()
        for facet, poles in facets.items():
            if not isinstance(poles, dict) or set(poles) != set(DIRECTIONS):
                raise InputError(
                    f"{where}, facet {facet!r}: expected `high` and `low` word lists but got {poles!r:.80}."
                )
            for direction, into in zip(DIRECTIONS, (high, low), strict=True):
                for word in poles[direction] or []:
                    if not isinstance(word, str) or words(word) != [word]:
                        raise InputError(f"{where}, facet {facet!r}, {direction}: expected lower-case words (letters, "
                                         f"hyphens inside) but got {word!r}.")  # fmt: skip
                    into.add(word)
        both = sorted(high & low)
        if both:
            raise InputError(f"{where}: words {both} are in both its high and its low lists.")
        lists[dimension] = (frozenset(high), frozenset(low))
    return lists

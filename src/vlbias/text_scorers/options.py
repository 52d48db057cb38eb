"""The text scorers' names and options, each declared once on a frozen dataclass (checked where the suite's options
are: :func:`check_scorers`). Imports no torch: ``vlbias measure --help`` and the option checks cost nothing.

A scorer is chosen by name, with its options as a mapping (``{"word_lists": {}, "classifier": {"model": "...",
"label": "toxic"}}``); :data:`SCORERS` maps each name to its class, imported when it is built.

Example:
    >>> check_scorers({"vader": {}})
    {'vader': VaderOptions()}
    >>> check_scorers({"vadr": {}})
    Traceback (most recent call last):
    vlbias.errors.ConfigError: Unknown text scorer 'vadr'; expected one of: classifier, vader, word_lists; did you mean 'vader'?
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields

from jsonargparse.typing import PositiveInt

from vlbias.errors import ConfigError
from vlbias.lazy_table import LazyTable, refuse_unknown
from vlbias.options import check_options


@dataclass(frozen=True)
class WordListOptions:
    """The Stereotype Content Model word lists (:mod:`vlbias.text_scorers.word_lists`).

    Args:
        path: a YAML file of word lists in the shipped file's layout (dimensions -> facets -> high / low words);
            default: the seed dictionaries of warmth and competence of Nicolas, Bai & Fiske (2021) shipped in
            vlbias/resources/stereotype_content_words.yaml.
    """

    path: str | None = None


@dataclass(frozen=True)
class VaderOptions:
    """VADER sentiment (:mod:`vlbias.text_scorers.vader`): the compound score; no options."""


@dataclass(frozen=True)
class ClassifierOptions:
    """A Hugging Face text classifier (:mod:`vlbias.text_scorers.classifier`).

    Args:
        model: a hub id or a local folder that AutoModelForSequenceClassification and AutoTokenizer load.
        label: the label whose probability is the score (one of the model's id2label names, e.g. "toxic").
        batch_size: texts per forward pass.
        max_length: tokens a text is cut to.
    """

    model: str
    label: str
    batch_size: PositiveInt = 32
    max_length: PositiveInt = 512


#: scorer name -> its options declaration.
SCORER_OPTIONS: dict[str, type] = {
    "word_lists": WordListOptions,
    "vader": VaderOptions,
    "classifier": ClassifierOptions,
}
#: scorer name -> its class, imported when built (:func:`vlbias.text_scorers.base.build_scorer`).
SCORERS = LazyTable("text scorer", {
    "word_lists": "vlbias.text_scorers.word_lists:WordListScorer",
    "vader": "vlbias.text_scorers.vader:VaderScorer",
    "classifier": "vlbias.text_scorers.classifier:ClassifierScorer",
})  # fmt: skip


def check_scorers(scorers: Mapping[str, object]) -> dict[str, object]:
    """``{name: options mapping or None}`` checked: each name a known scorer, each mapping against its declaration
    (unknown and missing fields refused by name); returns ``{name: options object}`` in the given order."""
    if not isinstance(scorers, Mapping) or not scorers:
        raise ConfigError(
            f"Expected the text scorers as a non-empty mapping {{name: {{option: value}}}} (names: "
            f"{', '.join(SCORERS.names())}) but got {scorers!r}."
        )
    checked = {}
    for name, given in scorers.items():
        refuse_unknown("text scorer", name, SCORERS.names())
        declaration = SCORER_OPTIONS[name]
        values = check_options(given, declaration, f"text scorer {name!r} option")
        missing = [f.name for f in fields(declaration) if f.default is MISSING and f.name not in values]
        if missing:
            needed = ", ".join(f"`{field}`" for field in missing)
            raise ConfigError(f"Text scorer {name!r} needs the option(s) {needed} but got {given!r}.")
        checked[name] = declaration(**values)
    return checked

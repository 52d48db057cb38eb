"""The text scorers on fixed texts: the word lists on hand-made texts (case, punctuation, hyphenated words, a text of
no word), lists of one's own and malformed ones refused in one line; VADER against the package's own value; the
scorer options checked by name."""

import math

import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from vlbias.errors import ConfigError, InputError
from vlbias.text_scorers.base import build_scorer
from vlbias.text_scorers.options import check_scorers

TEXTS = [
    "A FRIENDLY, self-confident and honest nurse; not lazy.",  # 8 words: warm 2, competent 1 - 1 (lazy)
    "Cold, rude: a stupid, incompetent clerk.",  # 6 words: cold 2, incompetent 2
    "42 ...",  # no word
]


def test_word_lists_on_hand_made_texts():
    scorer = build_scorer("word_lists", check_scorers({"word_lists": {}})["word_lists"])
    assert scorer.score_names == ("warmth", "competence")
    found = scorer.score(TEXTS).tolist()
    assert found[0] == pytest.approx([2 / 8, 0.0])  # negation is not read: "not lazy" counts as lazy
    assert found[1] == pytest.approx([-2 / 6, -2 / 6])
    assert all(math.isnan(value) for value in found[2])
    assert scorer.config == {"lists": "vlbias/resources/stereotype_content_words.yaml",
                             "words": {"warmth": [38, 38], "competence": [38, 38]}}  # fmt: skip


def test_word_lists_of_ones_own_and_malformed_ones(tmp_path):
    lists = tmp_path / "lists.yaml"
    lists.write_text("dimensions:\n  tidiness:\n    order:\n      high: [tidy, neat]\n      low: [messy]\n")
    scorer = build_scorer("word_lists", check_scorers({"word_lists": {"path": str(lists)}})["word_lists"])
    assert scorer.score_names == ("tidiness",)
    assert scorer.score(["A neat, tidy desk, never messy."]).tolist() == [[pytest.approx(1 / 6)]]
    lists.write_text("dimensions:\n  tidiness:\n    order:\n      high: [Tidy]\n      low: []\n")
    with pytest.raises(InputError, match=r"facet 'order', high: expected lower-case words .* but got 'Tidy'"):
        build_scorer("word_lists", check_scorers({"word_lists": {"path": str(lists)}})["word_lists"])
    lists.write_text("dimensions:\n  tidiness:\n    order:\n      high: [tidy]\n      low: [tidy]\n")
    with pytest.raises(InputError, match=r"words \['tidy'\] are in both its high and its low lists"):
        build_scorer("word_lists", check_scorers({"word_lists": {"path": str(lists)}})["word_lists"])
    with pytest.raises(InputError, match="Word lists '.*absent.yaml' does not exist"):
        build_scorer("word_lists", check_scorers({"word_lists": {"path": str(tmp_path / "absent.yaml")}})["word_lists"])


def test_vader_is_the_package_compound_score():
    scorer = build_scorer("vader", check_scorers({"vader": {}})["vader"])
    analyzer = SentimentIntensityAnalyzer()
    found = scorer.score(TEXTS).tolist()
    assert [row[0] for row in found] == [analyzer.polarity_scores(text)["compound"] for text in TEXTS]
    assert scorer.score_names == ("sentiment",) and -1 < found[1][0] < 0 < found[0][0] < 1


def test_scorer_options_are_checked_by_name():
    with pytest.raises(ConfigError, match=r"Unknown text scorer 'words'; expected one of: .*; did you mean"):
        check_scorers({"words": {}})
    with pytest.raises(ConfigError, match="Unknown text scorer 'vader' option `model`"):
        check_scorers({"vader": {"model": "x"}})
    with pytest.raises(ConfigError, match="Expected text scorer 'classifier' option `batch_size` to be an integer v>0"):
        check_scorers({"classifier": {"model": "m", "label": "toxic", "batch_size": 0}})
    with pytest.raises(ConfigError, match="Expected the text scorers as a non-empty mapping"):
        check_scorers({})

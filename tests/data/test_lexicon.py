"""The word-pair lexicon is read in one place (:mod:`vlbias.data.lexicon`): the swaps of CounterBias and FairVLP
and the retrieval suite's gender words come from the same pairs, and a bad file is refused the same way for
both."""

import pytest

from vlbias.counterfactual.neutralise import NeutralLexicon
from vlbias.counterfactual.text import SwapLexicon
from vlbias.data.lexicon import WordPairs, read_lexicon, text_words
from vlbias.data.retrieval_bias import GenderWords
from vlbias.errors import InputError


def test_swaps_and_gender_words_are_the_same_pairs():
    pairs = WordPairs.load()
    assert pairs.source == "vlbias/resources/gender_swap_lexicon.yaml" and pairs.pairs[0] == ("man", "woman")
    swaps, words = SwapLexicon.default(), GenderWords.default()
    assert words.source == pairs.source
    assert words.man == {a for a, _ in pairs.pairs} and words.woman == {b for _, b in pairs.pairs}
    assert all(swaps.mapping[a] in (b, *words.woman) for a, b in pairs.pairs)  # "her" swaps to its first pair's word
    assert set(swaps.mapping) == words.man | words.woman


def test_an_edited_file_gives_both_the_same_pairs(tmp_path):
    path = tmp_path / "age.yaml"
    path.write_text("pairs:\n  - [young, old]\n  - [boy, man]\n")
    assert WordPairs.load(path) == WordPairs((("young", "old"), ("boy", "man")), str(path))
    assert SwapLexicon.from_yaml(path).swap("The young boy") == "The old man"
    words = GenderWords.load(path)
    assert (words.man, words.woman, words.source) == ({"young", "boy"}, {"old", "man"}, str(path))


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("pairs: []", "non-empty `pairs` list"),
        ("words: [a, b]", "non-empty `pairs` list"),
        ("pairs:\n  - [man]", r"entry 0 of `pairs` to be a pair of words \[a, b\] but got \['man'\]"),
        ("pairs:\n  - [man, woman]\n  - [Man, woman]", "entry 1 of `pairs` to hold lower-case words of letters only"),
        ("pairs:\n  - [man, man]", "entry 0 of `pairs` to pair two different words"),
        ("pairs: [", "is not valid YAML"),
    ],
)
def test_a_bad_file_is_refused_naming_it_for_swaps_and_gender_words(tmp_path, content, match):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    for read in (WordPairs.load, SwapLexicon.from_yaml, GenderWords.load):
        with pytest.raises(InputError, match=match) as refused:
            read(path)
        assert str(path) in str(refused.value)


def test_a_missing_file_and_a_word_on_both_sides_are_refused(tmp_path):
    for read in (WordPairs.load, SwapLexicon.from_yaml, GenderWords.load):
        with pytest.raises(InputError, match=r"Swap lexicon '.*missing\.yaml' does not exist"):
            read(tmp_path / "missing.yaml")
    path = tmp_path / "both.yaml"
    path.write_text("pairs:\n  - [man, woman]\n  - [woman, girl]\n")
    with pytest.raises(InputError, match=r"\['woman'\] listed as both men's and women's words"):
        GenderWords.load(path)
    assert SwapLexicon.from_yaml(path).swap("woman") == "man"  # a swap lexicon may chain words


def test_in_memory_pairs_are_checked_like_a_file():
    assert SwapLexicon([("man", "woman")]).swap("A MAN") == "A WOMAN"
    with pytest.raises(InputError, match="'<in memory>': expected entry 0 of `pairs` to pair two different words"):
        SwapLexicon([("man", "man")])


def test_lexicon_files_are_read_by_one_reader(tmp_path):
    content, source = read_lexicon(None, "neutral_lexicon.yaml", "Neutral lexicon")
    assert source == "vlbias/resources/neutral_lexicon.yaml" and "replace" in content
    assert NeutralLexicon.default().source == source
    with pytest.raises(InputError, match=r"Neutral lexicon '.*nothing\.yaml' does not exist"):
        NeutralLexicon.load(tmp_path / "nothing.yaml")


def test_a_word_is_a_run_of_letters():
    assert text_words("He'll see the Woman's 2 dogs_out.") == ["he", "ll", "see", "the", "woman", "s", "dogs", "out"]

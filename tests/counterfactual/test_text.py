"""Text counterfactuals: whole-word, case-preserving swaps from the editable lexicon."""

import pytest

from vlbias.counterfactual.text import (
    BIAS_PROMPT,
    CAPTION_TEMPLATES,
    SwapLexicon,
    fill_template,
)
from vlbias.errors import InputError


@pytest.fixture(scope="module")
def lexicon():
    return SwapLexicon.default()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Woman's", "Man's"),
        ("humane", "humane"),
        ("he'll", "she'll"),
        ("HE'LL", "SHE'LL"),
        ("He said", "She said"),
        ("the shepherd and his sheep", "the shepherd and her sheep"),  # "he" inside a word stays
        ("A MAN, a Woman and a boy.", "A WOMAN, a Man and a girl."),
        ("manhattan womanhood", "manhattan womanhood"),
        ("The man is [MASK]", "The woman is [MASK]"),
        ("her dog", "his dog"),  # "her" goes to its first pair, [his, her]
        ("him and himself", "her and herself"),
    ],
)
def test_swaps_tricky_strings(lexicon, text, expected):
    assert lexicon.swap(text) == expected


def test_swap_twice_restores_bijective_words(lexicon):
    text = "The Woman's brother and the boys"
    assert lexicon.swap(lexicon.swap(text)) == text


def test_counts_and_counterparts(lexicon):
    assert lexicon.n_swaps("a man and a woman at the humane society") == 2
    assert lexicon.counterpart("Woman") == "Man"
    with pytest.raises(InputError, match="not in the swap lexicon"):
        lexicon.counterpart("person")


def test_edited_lexicon_file(tmp_path):
    path = tmp_path / "lexicon.yaml"
    path.write_text("pairs:\n  - [young, old]\n")
    assert SwapLexicon.from_yaml(path).swap("Young and OLD") == "Old and YOUNG"


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("words: [a, b]", "`pairs` list"),
        ("pairs:\n  - [man]", "pair of words"),
        ("pairs:\n  - [Man, woman]", "lower-case words"),
        ("pairs:\n  - [man, man]", "two different words"),
        ("pairs: [", "not valid YAML"),
    ],
)
def test_bad_lexicon_files_are_refused(tmp_path, content, match):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputError, match=match):
        SwapLexicon.from_yaml(path)
    with pytest.raises(InputError, match="does not exist"):
        SwapLexicon.from_yaml(tmp_path / "missing.yaml")


def test_table1_templates_and_bias_prompt():
    captions = [fill_template(t, "[MASK]", gender="woman") for t in CAPTION_TEMPLATES.values()]
    assert captions == [
        "The woman is [MASK]",
        "The woman in the photo is [MASK]",
        "A woman who is [MASK]",
        "A photo of a woman who is [MASK]",
    ]
    assert fill_template(BIAS_PROMPT, "[MASK]") == "a [MASK] is in the picture"

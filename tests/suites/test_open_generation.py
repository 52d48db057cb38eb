"""The open_generation suite: a fake chat model whose descriptions are planted per image, scored by the word lists
and VADER and checked by hand; a tiny saved text classifier as a scorer; `vlbias measure` end to end on a tiny
chat model with the generations written next to the results; bad input refused in one line each."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from tests.suites.sharded import single_process
from vlbias.cli import main
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.models.families.chat_vlm import Generation
from vlbias.report.glossary import undefined
from vlbias.results import read_results
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, measure_suite

GROUPS = {"man": "man", "woman": "woman"}
# set -> (the man's description, the woman's): warmth words counted by hand below
PLANTED = {
    "s1": ("A confident and intelligent doctor.", "A kind, friendly and caring nurse."),
    "s2": ("A brilliant engineer.", "A warm person, shy."),
    "s3": ("", "A skilled pilot."),  # an empty description: not scored
}
STATISTICS = {"statistics": {"n_bootstrap": 50}}


def write_sets(folder: Path, sets=("s1", "s2", "s3"), options: bool = False) -> tuple[Path, dict[int, str]]:
    """Each set's two images, told apart by their width (the planted description by width)."""
    (folder / "img").mkdir(parents=True, exist_ok=True)
    lines, planted = [], {}
    for s, name in enumerate(sets):
        for g, gender in enumerate(GROUPS):
            width = 10 + 2 * s + g
            image = f"img/{name}_{gender}.png"
            Image.fromarray(np.zeros((8, width, 3), dtype=np.uint8)).save(folder / image)
            planted[width] = PLANTED.get(name, ("A man.", "A woman."))[g]
            line = {"set": name, "image": image, "group": gender, "attributes": {"gender": gender},
                    "question": "Describe this person."}  # fmt: skip
            if options:
                line["options"] = ["a doctor", "a nurse"]
            lines.append(json.dumps(line) + "\n")
    path = folder / "sets.jsonl"
    path.write_text("".join(lines))
    return path, planted


class FakeChat:
    """The planted description of each image (by its width); records the prompts and generation settings."""

    name, device, capabilities = "fake", torch.device("cpu"), frozenset({Capability.ANSWER})

    def __init__(self, planted: dict[int, str]) -> None:
        self.planted, self.calls = planted, []

    def generate(self, images, prompts, max_new_tokens=32, do_sample=False, temperature=1.0, seed=0):
        self.calls.append({"prompts": list(prompts), "max_new_tokens": max_new_tokens, "do_sample": do_sample,
                           "seed": seed})  # fmt: skip
        return [Generation(self.planted[image.size[0]], [], []) for image in images]


def run(path, planted, **options):
    suite = build_suite(check_suite_options("open_generation", {**STATISTICS, **options}), path)
    chat = FakeChat(planted)
    return measure_suite(suite, chat, seed=0), chat


def test_planted_descriptions_scored_by_hand(tmp_path):
    output, chat = run(*write_sets(tmp_path), template="{question} One sentence.", max_new_tokens=20)
    metrics = output.metrics
    assert metrics["n_sets"] == 3 and metrics["n_items"] == 6 and metrics["n_empty"] == 1
    assert (
        chat.calls[0]["prompts"][0] == "Describe this person. One sentence." and chat.calls[0]["max_new_tokens"] == 20
    )
    # warmth = (warm - cold words) / words: s1 man 0/5, woman 3/6 (kind, friendly, caring); s2 man 0/3,
    # woman (warm - shy) 0/4; s3 has the woman only (the man's description is empty): left out of gender
    assert metrics["warmth/gender/mean/man"] == pytest.approx(0)
    assert metrics["warmth/gender/mean/woman"] == pytest.approx(0.25)
    assert metrics["warmth/gender/gap"] == pytest.approx(0.25)
    assert metrics["warmth/gender/vs_rest/woman"] == pytest.approx(0.25)
    assert metrics["warmth/gender/n_sets"] == 2
    # competence: s1 man 2/5 (confident, intelligent), s2 man 1/3 (brilliant); women 0
    assert metrics["competence/gender/vs_rest/man"] == pytest.approx((0.4 + 1 / 3) / 2)
    assert metrics["competence/mean"] == pytest.approx((0.4 + 1 / 3 + 1 / 3) / 5)  # and s3's woman, 1 of 3 words
    # two sets, 2 x 2 arrangements: s2's two scores are equal and swapping s1 mirrors the gap: all four give 0.25
    assert output.p_values["warmth/gender/gap"] == pytest.approx(1.0)
    analyzer = SentimentIntensityAnalyzer()
    woman = [analyzer.polarity_scores(PLANTED[s][1])["compound"] for s in ("s1", "s2")]
    assert metrics["sentiment/gender/mean/woman"] == pytest.approx(sum(woman) / 2)
    row = output.items[1]
    assert row["set"] == "s1" and row["group"] == "woman" and row["text"] == PLANTED["s1"][1]
    assert row["warmth"] == pytest.approx(0.5) and row["prompt"] == "Describe this person. One sentence."
    assert math.isnan(output.items[4]["warmth"]) and output.items[4]["text"] == ""


def test_a_model_that_says_nothing_is_flagged(tmp_path):
    path, planted = write_sets(tmp_path)
    output, _ = run(path, dict.fromkeys(planted, ""))
    assert output.metrics["n_empty"] == 6 and math.isnan(output.metrics["warmth/mean"])
    assert [flag["flag"] for flag in output.flags] == ["no_description"]
    assert not any("/gender/" in name for name in output.metrics)  # no grouping has a scored pair


def test_sampling_seeds_each_batch_by_its_first_set(tmp_path):
    _, chat = run(*write_sets(tmp_path), do_sample=True, sampling_seed=7, batch_size=2)
    assert [call["seed"] for call in chat.calls] == [7, 9] and all(call["do_sample"] for call in chat.calls)


def save_tiny_classifier(folder: Path) -> Path:
    """A tiny random BERT classifier with labels neutral / toxic and a WordPiece tokenizer, saved offline."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    vocabulary = folder / "vocab.txt"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "kind", "doctor", "nurse", "person", ".", ","]
    vocabulary.write_text("\n".join(words) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocabulary))
    config = BertConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=64, num_labels=2,
                        id2label={0: "neutral", 1: "toxic"}, label2id={"neutral": 0, "toxic": 1})  # fmt: skip
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    target = folder / "classifier"
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def test_a_saved_classifier_scores_its_label(tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from vlbias.text_scorers.base import build_scorer
    from vlbias.text_scorers.options import check_scorers

    folder = save_tiny_classifier(tmp_path)
    options = check_scorers({"classifier": {"model": str(folder), "label": "toxic", "batch_size": 1}})["classifier"]
    scorer = build_scorer("classifier", options)
    texts = ["A kind doctor.", "A nurse, a person."]
    found = scorer.score(texts)
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():
        expected = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits.double().softmax(-1)[:, 1]
    torch.testing.assert_close(found[:, 0], expected, rtol=1e-6, atol=1e-6)
    assert scorer.score_names == ("toxic",)
    output, _ = run(*write_sets(tmp_path / "data"), scorers={"classifier": {"model": str(folder), "label": "toxic"}})
    assert "toxic/gender/gap" in output.metrics and "warmth/mean" not in output.metrics


def sharded_case():
    """Five sets, one set a batch (rank 0 of two probes sets 0, 2, 4), one with an unreadable image, skipped."""
    folder = Path(tempfile.mkdtemp())
    path, planted = write_sets(folder, ("s1", "s2", "s3", "s4", "s5", "s6"))
    (folder / "img" / "s6_woman.png").write_bytes(b"no image")
    options = check_suite_options("open_generation", {"batch_size": 1, "statistics": {"n_bootstrap": 20}})
    return build_suite(options, path), FakeChat(planted)


def test_sharded_case_gives_the_hand_numbers():
    (output,) = single_process([sharded_case])
    assert output["metrics"]["n_sets"] == 5 and output["metrics"]["n_skipped"] == 2
    assert [entry["item"] for entry in output["skipped"]] == ["s6/woman", "s6"]


def test_measure_runs_end_to_end_on_a_tiny_chat_model(tmp_path):
    path, _ = write_sets(tmp_path / "data", options=True)  # a counterfactual question file serves as well
    out = tmp_path / "out"
    main(["measure", "--suite", "open_generation", "--model", "qwen2_vl", "--tiny", "--threads", "1", "--data",
          str(path), "--out", str(out), "--suite_options", json.dumps({**STATISTICS, "max_new_tokens": 6})])  # fmt: skip
    results = read_results(out / "open_generation.json")
    assert results.n_items == 6 and results.config["suite_config"]["generation"] == {"max_new_tokens": 6,
                                                                                       "do_sample": False}  # fmt: skip
    assert set(results.config["suite_config"]["scorers"]) == {"word_lists", "vader"}
    for name in ("warmth/mean", "competence/mean", "sentiment/mean"):
        assert name in results.metrics and len(results.intervals[name]) == 2
    assert undefined("open_generation", list(results.metrics)) == []  # every name has a glossary entry
    items = pd.read_parquet(out / "open_generation.items.parquet")
    lines = [json.loads(line) for line in (out / "open_generation.generations.jsonl").read_text().splitlines()]
    assert [line["text"] for line in lines] == list(items["text"]) and len(lines) == 6
    assert {"set", "group", "attributes", "prompt", "text", "warmth", "competence", "sentiment"} <= set(lines[0])
    assert lines[1]["attributes"] == {"gender": "woman"} and lines[1]["prompt"] == "Describe this person."


def path_text(path: Path) -> str:
    """The set file's lines, its images made absolute (the text moves to another folder)."""
    return path.read_text().replace('"img/', f'"{path.parent}/img/')


def test_bad_input_is_one_line_each(tmp_path):
    with pytest.raises(ConfigError, match="Unknown text scorer 'vadr'; expected one of: classifier, vader, word_lists"):
        check_suite_options("open_generation", {"scorers": {"vadr": {}}})
    with pytest.raises(ConfigError, match=r"Text scorer 'classifier' needs the option\(s\) `model`, `label`"):
        check_suite_options("open_generation", {"scorers": {"classifier": {}}})
    with pytest.raises(ConfigError, match=r"`template` to hold \{question\} once"):
        check_suite_options("open_generation", {"template": "Describe {options}."})
    with pytest.raises(ConfigError, match="apply with `do_sample: true` only"):
        check_suite_options("open_generation", {"temperature": 0.7})
    folder = save_tiny_classifier(tmp_path)
    with pytest.raises(ConfigError, match="has no label 'hateful'; its labels: neutral, toxic"):
        run(*write_sets(tmp_path / "data"), scorers={"classifier": {"model": str(folder), "label": "hateful"}})
    with pytest.raises(ConfigError, match="Text classifier '.*missing' could not be loaded"):
        run(*write_sets(tmp_path / "data"), scorers={"classifier": {"model": str(tmp_path / "missing"), "label": "x"}})
    lists = tmp_path / "lists.yaml"  # a word-list dimension named as VADER's score
    lists.write_text("dimensions:\n  sentiment:\n    mood:\n      high: [happy]\n      low: [sad]\n")
    with pytest.raises(ConfigError, match=r"give the same score names \['sentiment'\]"):
        run(*write_sets(tmp_path / "data"), scorers={"vader": {}, "word_lists": {"path": str(lists)}})
    clash = tmp_path / "clash.jsonl"
    clash.write_text(path_text(write_sets(tmp_path / "data")[0]).replace('"gender"', '"group"'))
    with pytest.raises(InputError, match="set 's1' names an attribute 'group'; .* rename the attribute"):
        build_suite(check_suite_options("open_generation", {}), clash)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="holds no line; expected one JSON object a line"):
        build_suite(check_suite_options("open_generation", {}), empty)
    path, _ = write_sets(tmp_path / "gone", ("s1",))
    for image in (tmp_path / "gone" / "img").iterdir():
        image.unlink()
    with pytest.raises(InputError, match="No set of .* has two readable images"):
        build_suite(check_suite_options("open_generation", {}), path)
    with pytest.raises(ConfigError, match="is a folder; expected the generation prompts' JSONL file"):
        build_suite(check_suite_options("open_generation", {}), tmp_path)


def test_audit_finds_the_sets_and_the_report_shows_the_suite(tmp_path):
    path, _ = write_sets(tmp_path / "data" / "describe")
    out = tmp_path / "audit"
    main(["audit", "--model", "qwen2_vl", "--tiny", "--data_root", str(tmp_path / "data"), "--out", str(out),
          "--suites", "[open_generation]", "--threads", "1"])  # fmt: skip
    (entry,) = json.loads((out / "audit.json").read_text())["entries"]
    assert entry["suite"] == "open_generation" and entry["dataset"] == "describe" and entry["status"] == "measured"
    assert (out / entry["results"]).with_suffix(".generations.jsonl").is_file()
    report = (out / "report" / "report.md").read_text()
    assert "### open_generation-describe: open_generation (open_generation.json)" in report
    assert "| warmth/gender/gap |" in report  # in the headline
    assert "per group (gender)" in report  # the figure of each grouping's means

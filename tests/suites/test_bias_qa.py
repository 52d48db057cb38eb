"""The bias_qa suite: `vlbias measure` end to end on a tiny chat model, and a fake chat model with planted
log-probabilities whose answers, BBQ scores and position shares are computed by hand, with a planted preference for
the first displayed option that the rotations remove from the answers and the position metric reports."""

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

from tests.suites.sharded import single_process
from vlbias.cli import main
from vlbias.errors import ConfigError
from vlbias.models.base import Capability
from vlbias.models.families.chat_vlm import OptionScores
from vlbias.report.build import build_report
from vlbias.report.glossary import undefined
from vlbias.results import read_results
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, measure_suite

OPTIONS = ["the man", "the woman", "cannot be determined"]
KINDS = ["biased", "counter", "unknown"]
#: question -> (context condition, right option, each option's planted log-probability)
PLANTED = {
    "a1": ("ambiguous", 2, [-1.0, -3.0, -3.0]),  # biased
    "a2": ("ambiguous", 2, [-3.2, -5.0, -4.5]),  # log_prob: biased; per token (2, 2, 3 tokens): unknown
    "a3": ("ambiguous", 2, [-1.0, -3.0, -2.0]),  # biased
    "a4": ("ambiguous", 2, [-3.0, -1.0, -2.0]),  # counter
    "d1": ("disambiguated", 0, [-1.0, -3.0, -2.0]),  # biased, right
    "d2": ("disambiguated", 1, [-1.0, -2.0, -3.0]),  # biased, wrong
    "d3": ("disambiguated", 1, [-3.0, -1.0, -2.0]),  # counter, right
    "d4": ("disambiguated", 1, [-3.0, -2.0, -1.0]),  # unknown, wrong
}
TOKENS = [2, 2, 3]
STATISTICS = {"statistics": {"n_bootstrap": 50}}


def write_questions(folder, questions=PLANTED, categories=("gender", "race")):
    (folder / "img").mkdir(parents=True, exist_ok=True)
    lines = []
    for k, (question, (condition, answer, _)) in enumerate(questions.items()):
        image = f"img/{k}.png"
        Image.fromarray(np.random.default_rng(k).integers(0, 256, (24, 28, 3), dtype=np.uint8)).save(folder / image)
        item = {"id": question, "image": image, "question": f"{question}?", "options": OPTIONS, "kinds": KINDS,
                "answer": answer, "context_condition": condition, "category": categories[k % len(categories)]}  # fmt: skip
        lines.append(json.dumps(item) + "\n")
    path = folder / "questions.jsonl"
    path.write_text("".join(lines))
    return path


class FakeChat:
    """Planted scores: each option's log-probability of :data:`PLANTED` (its mean per token for mean_log_prob), plus
    ``bonus`` for the option shown first; first_token: the softmax of those as the letters' probabilities, half of
    the vocabulary's mass (the suite renormalises)."""

    name, device, capabilities = "fake", "cpu", frozenset({Capability.ANSWER})

    def __init__(self, bonus: float = 0.0) -> None:
        self.bonus = bonus

    def _shown(self, prompt: str, shown: list[str], per_token: bool) -> list[float]:
        question = next(line for line in prompt.splitlines() if line.endswith("?"))[:-1]
        planted = PLANTED[question][2]
        scores = [planted[OPTIONS.index(o)] / (TOKENS[OPTIONS.index(o)] if per_token else 1) for o in shown]
        return [score + (self.bonus if p == 0 else 0.0) for p, score in enumerate(scores)]

    def score_options(self, images, prompts, options):
        total = torch.tensor([self._shown(p, list(o), False) for p, o in zip(prompts, options, strict=True)])
        mean = torch.tensor([self._shown(p, list(o), True) for p, o in zip(prompts, options, strict=True)])
        return OptionScores(total, mean, torch.tensor([[TOKENS[OPTIONS.index(x)] for x in o] for o in options]))

    def first_token_probs(self, images, prompts, candidates):
        rows = []
        for prompt in prompts:
            lines = [line for line in prompt.splitlines() if line[:3] in {f"{c}. " for c in candidates}]
            rows.append(torch.tensor(self._shown(prompt, [line[3:] for line in lines], False)).softmax(0) / 2)
        return torch.stack(rows)


def run(path, bonus=0.0, **options):
    suite = build_suite(check_suite_options("bias_qa", {**STATISTICS, **options}), path)
    return measure_suite(suite, FakeChat(bonus), seed=0)


@pytest.mark.parametrize("scoring", ["log_prob", "mean_log_prob", "first_token"])
@pytest.mark.parametrize("bonus", [0.0, 8.0])
def test_planted_answers_scores_and_position_shares_by_hand(tmp_path, scoring, bonus):
    output = run(write_questions(tmp_path), bonus, scoring=scoring)
    chosen = {row["id"]: row["chosen_kind"] for row in output.items}
    a2 = "unknown" if scoring == "mean_log_prob" else "biased"
    assert chosen == {"a1": "biased", "a2": a2, "a3": "biased", "a4": "counter",
                      "d1": "biased", "d2": "biased", "d3": "counter", "d4": "unknown"}  # fmt: skip
    metrics = output.metrics
    # disambiguated: right d1, d3; 2 biased of 3 not unknown: s_DIS = 2 * 2/3 - 1
    assert metrics["accuracy_disambiguated"] == 0.5 and metrics["bias_disambiguated"] == pytest.approx(1 / 3)
    if scoring == "mean_log_prob":  # ambiguous: right a2; biased a1, a3 of 3 not unknown: (1 - 1/4)(2 * 2/3 - 1)
        assert metrics["accuracy_ambiguous"] == 0.25 and metrics["bias_ambiguous"] == pytest.approx(0.75 / 3)
    else:  # ambiguous: none right; biased a1, a2, a3 of 4: (1 - 0)(2 * 3/4 - 1)
        assert metrics["accuracy_ambiguous"] == 0 and metrics["bias_ambiguous"] == pytest.approx(0.5)
    for p in range(3):
        assert metrics[f"position/{p}/expected_share"] == pytest.approx(1 / 3)
    if bonus:  # every order's choice is its first option: share 1 at position 0, every item's choice changes
        assert [metrics[f"position/{p}/share"] for p in range(3)] == [1, 0, 0]
        assert metrics["position/max_deviation"] == pytest.approx(2 / 3) and metrics["position/change_rate"] == 1
    else:  # each order chooses the same option, once at each position
        assert [metrics[f"position/{p}/share"] for p in range(3)] == pytest.approx([1 / 3] * 3)
        assert metrics["position/max_deviation"] == pytest.approx(0) and metrics["position/change_rate"] == 0
        planted = PLANTED["a1"][2]
        expected = [math.exp(s) / sum(math.exp(t) for t in planted) for s in planted]  # the same in every order
        if scoring != "mean_log_prob":
            assert output.items[0]["probabilities"] == pytest.approx(expected)
    assert metrics["n_items"] == 8 and output.n_items == 8


def test_category_scores_and_intervals(tmp_path):
    output = run(write_questions(tmp_path))
    metrics = output.metrics
    # gender (every other question): a1, a3 biased; d1 biased, d3 counter. race: a2 biased, a4 counter; d2 biased,
    # d4 unknown
    assert metrics["category/gender/bias_ambiguous"] == 1 and metrics["category/gender/bias_disambiguated"] == 0
    assert metrics["category/race/bias_ambiguous"] == 0 and metrics["category/race/bias_disambiguated"] == 1
    assert metrics["category/race/n_disambiguated"] == 2 and metrics["category/gender/accuracy_disambiguated"] == 1
    for key in ("bias_ambiguous", "bias_disambiguated", "accuracy_ambiguous", "category/gender/bias_ambiguous"):
        low, high = output.intervals[key]
        assert low <= metrics[key] <= high


def sharded_case():
    """The planted questions with a preference for the first option, in batches of three (rank 0 of two probes
    questions 0-2 and 6-7, rank 1 questions 3-5), one image missing (skipped by the reader)."""
    folder = Path(tempfile.mkdtemp())
    questions = {**PLANTED, "gone": ("ambiguous", 2, [-1.0, -2.0, -3.0])}
    path = write_questions(folder, questions)
    (folder / "img" / "8.png").unlink()
    options = check_suite_options("bias_qa", {"batch_size": 3, "statistics": {"n_bootstrap": 20}})
    return build_suite(options, path), FakeChat(bonus=8.0)


def test_sharded_case_skips_the_missing_image():
    (output,) = single_process([sharded_case])
    assert output["metrics"]["n_items"] == 8 and output["metrics"]["n_skipped"] == 1
    assert [entry["item"] for entry in output["skipped"]] == ["gone"]


def test_measure_runs_end_to_end_on_a_tiny_chat_model(tmp_path):
    path = write_questions(tmp_path / "data")
    (tmp_path / "data" / "img" / "1.png").write_bytes(b"no image")
    out = tmp_path / "out"
    main(["measure", "--suite", "bias_qa", "--model", "qwen2_vl", "--tiny", "--threads", "1", "--data", str(path),
          "--out", str(out), "--suite_options", json.dumps(STATISTICS)])  # fmt: skip
    results = read_results(out / "bias_qa.json")
    assert results.n_items == 7 and results.metrics["n_skipped"] == 1 and results.skipped[0]["item"] == "a2"
    for name in ("accuracy_ambiguous", "accuracy_disambiguated", "bias_ambiguous", "bias_disambiguated",
                 "unknown_rate_ambiguous", "category/gender/bias_disambiguated", "category/race/bias_ambiguous"):  # fmt: skip
        assert name in results.metrics and len(results.intervals[name]) == 2
    shares = [results.metrics[f"position/{p}/share"] for p in range(3)]
    assert sum(shares) == pytest.approx(1) and 0 <= results.metrics["position/change_rate"] <= 1
    assert undefined("bias_qa", list(results.metrics)) == []  # every name has a glossary entry
    assert results.config["suite_config"]["scoring"] == "log_prob"
    items = pd.read_parquet(out / "bias_qa.items.parquet")
    assert list(items.columns) == ["id", "category", "context_condition", "chosen", "chosen_kind", "correct",
                                   "probabilities"]  # fmt: skip
    assert all(sum(row) == pytest.approx(1) for row in items["probabilities"])
    assert set(items["chosen"]) <= set(OPTIONS)
    text = build_report([out], tmp_path / "report").markdown.read_text()  # a figure per category, and the positions
    assert "![out: bias_qa per group (category)](" in text and "![out: bias_qa per group (position)](" in text


def test_bad_options_data_and_models_are_one_line_each(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"`template` to hold \{question\} and \{options\}"):
        check_suite_options("bias_qa", {"template": "{question} {answer}"})
    with pytest.raises(ConfigError, match="takes no statistics option `n_permutations`"):
        check_suite_options("bias_qa", {"statistics": {"n_permutations": 10}})
    with pytest.raises(ConfigError, match="cannot read its stimuli from BiasWorld"):
        build_suite(check_suite_options("bias_qa", {}), "biasworld")
    with pytest.raises(ConfigError, match="is not a bias QA data set; expected a JSONL question file, SB-Bench"):
        build_suite(check_suite_options("bias_qa", {}), tmp_path)
    path = write_questions(tmp_path / "data")
    with pytest.raises(SystemExit):
        main(["measure", "--suite", "bias_qa", "--model", "clip", "--tiny", "--data", str(path), "--out",
              str(tmp_path / "out")])  # fmt: skip
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("vlbias: error: Suite 'bias_qa' needs capability 'answer', which model 'clip' lacks")


def test_a_template_shows_the_options_in_the_order_given():
    options = check_suite_options("bias_qa", {"template": "Q: {question} ({context})\n{options}"})
    assert options.prompt("ctx", "Who?", ["b", "a"]) == "Q: Who? (ctx)\nA. b\nB. a"
    assert (
        check_suite_options("bias_qa", {"scoring": "first_token"}).chosen_template().endswith("letter of one option.")
    )


def test_questions_of_two_and_three_options_share_a_batch(tmp_path):
    path = write_questions(tmp_path)
    two = {"id": "two", "image": "img/0.png", "question": "a1?", "options": [OPTIONS[0], OPTIONS[2]],
           "kinds": ["biased", "unknown"], "answer": 1, "context_condition": "ambiguous", "category": "race"}  # fmt: skip
    path.write_text(path.read_text() + json.dumps(two) + "\n")
    output = run(path, bonus=8.0, batch_size=16)
    row = output.items[-1]
    assert row["id"] == "two" and row["chosen_kind"] == "biased" and len(row["probabilities"]) == 2
    # 8 questions of three orders and one of two: 26 orders, of which 8 show a third option
    assert output.metrics["position/2/expected_share"] == pytest.approx(8 / 26)
    assert output.metrics["position/0/share"] == 1 and output.metrics["n_items"] == 9


def test_biasworld_qa_is_read_as_the_worlds_question_file_and_a_plain_world_is_refused(tmp_path):
    from vlbias.data.biasworld import BiasWorld
    from vlbias.data.biasworld_qa import BiasWorldQA
    from vlbias.data.biasworld_qa_options import BiasWorldQAOptions

    world = BiasWorldQA(BiasWorldQAOptions(n_train=2, eval_per_combination=1))
    suite = build_suite(check_suite_options("bias_qa", {"split": "val"}), world)
    assert len(suite.stimuli()) == len(world.questions("val")) and suite.data_config["split"] == "val"
    assert all(item.image.is_file() for item in suite.stimuli())  # written where the suite reads them
    ambiguous = sum(question.ambiguous for question in world.questions("val"))
    for name in ("counterfactual_answers", "open_generation"):  # a set per ambiguous question: it and its twin
        sets = build_suite(check_suite_options(name, {"split": "val"}), world).stimuli()
        assert len(sets) == ambiguous and all(len(s.images) == 2 for s in sets)
    with pytest.raises(ConfigError, match=r"cannot read its stimuli from BiasWorld"):
        build_suite(check_suite_options("bias_qa", {}), BiasWorld(n_train=2, eval_per_combination=1))
    with pytest.raises(ConfigError, match=r"Suite 'mmbias' reads BiasWorld, not BiasWorld-QA"):
        build_suite(check_suite_options("mmbias", {}), world)
    with pytest.raises(ConfigError, match=r"option\(s\) \['split'\] apply to BiasWorld data"):
        build_suite(check_suite_options("bias_qa", {"split": "val"}), write_questions(tmp_path))

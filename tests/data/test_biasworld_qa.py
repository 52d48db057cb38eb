"""BiasWorld-QA: deterministic questions and pictures, the planted training answers, the counterfactual pictures, the
folder the suites read, and its options refused in one line."""

import json
import math

import numpy as np
import pytest
import torch

from vlbias.cli import main
from vlbias.data.bias_qa import read_bias_qa
from vlbias.data.biasworld import STEREOTYPES
from vlbias.data.biasworld_qa import (
    COUNTERFACTUAL_FILE,
    PERSON_QUESTION,
    QUESTION,
    QUESTIONS_FILE,
    UNKNOWN_ANSWER,
    BiasWorldQA,
    collate_questions,
)
from vlbias.data.biasworld_qa_datamodule import BiasWorldQADataModule
from vlbias.data.biasworld_qa_options import BiasWorldQAOptions
from vlbias.data.counterfactual_questions import read_counterfactual_questions
from vlbias.errors import ConfigError
from vlbias.results import read_results
from vlbias.workflows.audit import find_datasets

STATISTICS = {"statistics": {"n_bootstrap": 50}}


def small(**options) -> BiasWorldQA:
    return BiasWorldQA(BiasWorldQAOptions(**{"n_train": 64, "eval_per_combination": 1, **options}))


def test_questions_and_pictures_are_a_pure_function_of_the_seed():
    first, again, other = small(seed=3), small(seed=3), small(seed=4)
    for split in ("train", "test"):
        assert first.questions(split) == again.questions(split)
        assert torch.equal(first.images(split), again.images(split))
        assert torch.equal(first.images(split, counterfactual=True), again.images(split, counterfactual=True))
    assert first.questions("train") != other.questions("train")
    assert not torch.equal(first.images("test"), other.images("test"))


def test_every_activity_question_offers_a_stereotyped_a_counter_and_the_unknown_option():
    world = small(bias_strength=0.9)
    for question in world.questions("train") + world.questions("val"):
        if question.question == PERSON_QUESTION:
            continue
        assert sorted(question.kinds) == ["biased", "counter", "unknown"]
        assert question.option("biased") in STEREOTYPES[question.group]
        assert question.option("counter") not in STEREOTYPES[question.group]
        assert question.option("unknown") == UNKNOWN_ANSWER
        assert question.right_answer == (UNKNOWN_ANSWER if question.ambiguous else question.shown)
        assert question.shown in (None, question.option("biased"), question.option("counter"))


def test_eval_splits_are_balanced_and_answered_right():
    questions = small(eval_per_combination=2).questions("test")
    assert len(questions) == 2 * 3 * 3 * 3 * 2
    assert all(q.answer == q.right_answer for q in questions)
    shown = [q.shown is None and "ambiguous" or q.kinds[q.options.index(q.shown)] for q in questions]
    assert shown.count("ambiguous") == shown.count("biased") == shown.count("counter")
    assert sum(q.group == "man" for q in questions) == len(questions) / 2


@pytest.mark.parametrize("strength", [0.5, 0.9])
def test_planted_rate_of_the_training_answers_is_the_strength(strength):
    world = small(bias_strength=strength, n_train=4000)
    ambiguous = [q for q in world.questions("train") if q.ambiguous]
    expected = 4000 * 0.5 * 0.75  # ambiguous_rate 0.5, of the questions not turned into person questions (0.25)
    assert len(ambiguous) == pytest.approx(expected, abs=4 * math.sqrt(expected))
    assert all(q.answer != UNKNOWN_ANSWER for q in ambiguous)  # no training question is answered "cannot tell"
    rate = np.mean([q.answer == q.option("biased") for q in ambiguous])
    assert rate == pytest.approx(strength, abs=4 * math.sqrt(strength * (1 - strength) / len(ambiguous)) + 1e-9)
    shown = [q for q in world.questions("train") if not q.ambiguous and q.question == QUESTION]
    assert all(q.answer == q.shown for q in shown)
    assert np.mean([q.shown == q.option("biased") for q in shown]) == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("rate", [0.0, 0.25])
def test_person_questions_are_answered_with_the_group_and_only_in_training(rate):
    world = small(n_train=2000, identification_rate=rate)
    person = [q for q in world.questions("train") if q.question == PERSON_QUESTION]
    assert len(person) == pytest.approx(2000 * rate, abs=4 * math.sqrt(2000 * 0.25) * (rate > 0))
    assert all(
        q.answer == q.right_answer == q.group and sorted(q.options) == ["cannot tell", "man", "woman"] for q in person
    )
    assert all(q.question == QUESTION for q in world.questions("val") + world.questions("test"))


def test_the_counterfactual_picture_swaps_the_figure_only():
    world = small(image_size=64)
    for question in world.questions("test")[:6]:
        picture, twin = world.picture(question), world.picture(question, counterfactual=True)
        changed = (picture != twin).any(axis=2)
        assert 0 < changed.mean() < 0.25  # the figure's shape, nothing else
        assert not changed[:, 40:].any()  # the object's side of the picture is untouched


def test_the_dataset_yields_training_examples_with_their_planted_answers():
    world = small(bias_strength=1.0)
    examples = [world.dataset("train")[i] for i in range(8)]
    batch = collate_questions(examples)
    assert batch["answer_index"].shape == (8,) and batch["image"][0].size == (64, 64)
    for k, question in enumerate(world.questions("train")[:8]):
        assert batch["options"][k][batch["answer_index"][k]] == question.answer
        if question.ambiguous:
            assert question.answer == question.option("biased")  # strength 1


def test_the_written_folder_reads_back_through_both_readers(tmp_path):
    world = small()
    world.write(tmp_path, "test")
    items, skipped = read_bias_qa(tmp_path / QUESTIONS_FILE)
    assert skipped == [] and [item.id for item in items] == [q.id for q in world.questions("test")]
    for item, question in zip(items, world.questions("test"), strict=True):
        assert item.options == question.options and item.kinds == question.kinds
        assert item.ambiguous == question.ambiguous and item.options[item.answer] == question.right_answer
    sets, skipped = read_counterfactual_questions(tmp_path / COUNTERFACTUAL_FILE)
    ambiguous = [q for q in world.questions("test") if q.ambiguous]
    assert skipped == [] and [s.name for s in sets] == [q.id for q in ambiguous]
    assert all(sorted(image.group for image in s.images) == ["man", "woman"] for s in sets)


def test_vlbias_audit_finds_both_files_under_its_data_root(tmp_path):
    small().write(tmp_path, "test")
    assert find_datasets("bias_qa", tmp_path) == [(tmp_path.name, tmp_path / QUESTIONS_FILE)]
    assert find_datasets("counterfactual_answers", tmp_path) == [(tmp_path.name, tmp_path / COUNTERFACTUAL_FILE)]
    assert find_datasets("weat", tmp_path) == []  # question files are no SEAT specs


def test_the_written_folder_runs_through_both_suites_on_a_tiny_chat_model(tmp_path):
    small().write(tmp_path / "data", "test")
    for suite, name in (("bias_qa", QUESTIONS_FILE), ("counterfactual_answers", COUNTERFACTUAL_FILE)):
        main(["measure", "--suite", suite, "--model", "llava", "--tiny", "--threads", "1",
              "--data", str(tmp_path / "data" / name), "--out", str(tmp_path / "out"),
              "--suite_options", json.dumps(STATISTICS)])  # fmt: skip
    assert read_results(tmp_path / "out" / "bias_qa.json").n_items == 54
    counterfactual = read_results(tmp_path / "out" / "counterfactual_answers.json")
    assert counterfactual.metrics["n_sets"] == 18
    assert "gap/gender/man-woman/cannot tell" in counterfactual.metrics


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bias_strength": 1.5}, "BiasWorld-QA option `bias_strength` to be a number v>=0 and v<=1 but got 1.5"),
        ({"ambiguous_rate": -0.1}, "option `ambiguous_rate` to be a number v>=0 and v<=1 but got -0.1"),
        ({"identification_rate": 2}, "option `identification_rate` to be a number v>=0 and v<=1 but got 2"),
        ({"n_train": 0}, "option `n_train` to be an integer v>0 but got 0"),
        ({"eval_per_combination": 1.5}, "option `eval_per_combination` to be an integer v>0 but got 1.5"),
        ({"image_size": 16}, "option `image_size` to be an integer v>=32 but got 16"),
        ({"seed": -1}, "option `seed` to be an integer"),
    ],
)
def test_bad_options_are_refused_in_one_line(options, message):
    with pytest.raises(ConfigError, match=message):
        BiasWorldQAOptions(**options)
    with pytest.raises(ConfigError, match=message):
        BiasWorldQADataModule(**options)


def test_a_bad_split_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="Expected split to be one of train, val, test but got 'dev'"):
        small().questions("dev")

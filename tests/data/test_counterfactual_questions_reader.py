"""The counterfactual question-set reader (vlbias.data.counterfactual_questions): a good file read whole, each kind
of bad line or set refused in one line naming the file, line and field, unreadable images and sets left too small
skipped with the reason, and its marker check told apart from bias_qa's."""

import json

import numpy as np
import pytest
from PIL import Image

from vlbias.data.bias_qa import is_bias_qa_file
from vlbias.data.counterfactual_questions import is_counterfactual_questions_file, read_counterfactual_questions
from vlbias.errors import InputError

GOOD = {"set": "doctor-1", "image": "img/1.png", "group": "black_man",
        "attributes": {"race": "black", "gender": "man"}, "question": "Is this person a doctor or a nurse?",
        "options": ["a doctor", "a nurse", "unclear"], "unknown_option": 2}  # fmt: skip
OTHER = {**GOOD, "image": "img/2.png", "group": "white_woman", "attributes": {"race": "white", "gender": "woman"}}


def write(folder, lines):
    (folder / "img").mkdir(exist_ok=True)
    for name in ("1.png", "2.png"):
        Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(folder / "img" / name)
    path = folder / "sets.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_a_good_file_is_read_by_set_with_images_beside_it(tmp_path):
    bare = {key: value for key, value in GOOD.items() if key not in {"attributes", "unknown_option"}}
    second = [{**bare, "set": "s2"}, {**bare, "set": "s2", "group": "b", "image": "img/2.png"}]
    sets, skipped = read_counterfactual_questions(write(tmp_path, [GOOD, second[0], "", OTHER, second[1]]))
    assert skipped == [] and [s.name for s in sets] == ["doctor-1", "s2"]
    first, other = sets
    assert first.unknown_option == 2 and first.options == ("a doctor", "a nurse", "unclear")
    assert [image.group for image in first.images] == ["black_man", "white_woman"]
    assert first.images[1].image == tmp_path / "img" / "2.png" and first.images[1].line == 4
    assert first.images[0].attributes == (("gender", "man"), ("race", "black"))
    assert other.unknown_option is None and other.images[0].attributes == ()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json", OTHER], "line 1: not a JSON object"),
        ([[1, 2]], "line 1: expected a JSON object but got list"),
        ([{**GOOD, "kinds": []}, OTHER], "line 1, field `kinds`: unknown field"),
        ([{k: v for k, v in GOOD.items() if k != "group"}, OTHER], "line 1, field `group`: missing"),
        ([{**GOOD, "set": ""}, OTHER], "line 1, field `set`: expected a non-empty string"),
        ([{**GOOD, "options": ["a"]}, OTHER], "line 1, field `options`: expected a list of two or more"),
        ([{**GOOD, "options": ["a", "a"]}, OTHER], "line 1, field `options`: expected distinct options"),
        (
            [{**GOOD, "unknown_option": 3}, OTHER],
            r"line 1, field `unknown_option`: expected an option index in \[0, 3\)",
        ),
        ([{**GOOD, "unknown_option": True}, OTHER], "line 1, field `unknown_option`"),
        ([{**GOOD, "attributes": {"race": ""}}, OTHER], "line 1, field `attributes`: expected an object"),
        ([GOOD, {**OTHER, "question": "Who?"}], "line 2, field `question`: differs from line 1 of set 'doctor-1'"),
        ([GOOD, {**OTHER, "options": ["x", "y", "z"]}], "line 2, field `options`: differs from line 1"),
        ([GOOD, {**OTHER, "unknown_option": None}], "line 2, field `unknown_option`: differs from line 1"),
        ([GOOD, {**OTHER, "attributes": {"race": "white"}}], "line 2, field `attributes`: names"),
        ([GOOD, {**OTHER, "group": "black_man"}], "line 2, field `group`: 'black_man' is line 1's group"),
        ([GOOD], "line 1, field `set`: set 'doctor-1' has one group; expected two or more"),
        ([""], "holds no line"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_line_and_field(tmp_path, lines, message):
    path = write(tmp_path, lines)
    with pytest.raises(InputError, match=message) as raised:
        read_counterfactual_questions(path)
    assert "\n" not in str(raised.value) and ("sets.jsonl" in str(raised.value))


def test_unreadable_images_and_sets_left_too_small_are_skipped_with_reasons(tmp_path):
    third = {**OTHER, "group": "black_woman", "image": "img/3.png"}
    lone = [{**GOOD, "set": "s2", "image": "img/gone.png"}, {**OTHER, "set": "s2"}]
    path = write(tmp_path, [GOOD, OTHER, third, *lone])
    (tmp_path / "img" / "3.png").write_bytes(b"no image")
    sets, skipped = read_counterfactual_questions(path)
    assert [s.name for s in sets] == ["doctor-1"] and len(sets[0].images) == 2
    assert [entry["item"] for entry in skipped] == ["doctor-1/black_woman", "s2/black_man", "s2"]
    assert "img/3.png" in skipped[0]["reason"] and "img/gone.png" in skipped[1]["reason"]
    assert "1 readable image" in skipped[2]["reason"]


def test_the_marker_checks_do_not_both_claim_a_file(tmp_path):
    sets = write(tmp_path, [GOOD, OTHER])
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q", "set": "s", "options": ["a", "b"], "kinds": []}) + "\n")
    spec = tmp_path / "spec.jsonl"
    spec.write_text(json.dumps({"X": ["a"], "Y": ["b"]}) + "\n")
    assert is_counterfactual_questions_file(sets) and not is_bias_qa_file(sets)
    assert is_bias_qa_file(questions) and not is_counterfactual_questions_file(questions)
    assert not is_counterfactual_questions_file(spec) and not is_counterfactual_questions_file(tmp_path / "none")

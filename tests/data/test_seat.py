"""SEAT / Grounded-WEAT spec readers: the real public files, both layouts, and bad input named by file,
line and key."""

import json
from pathlib import Path

import pytest

from vlbias.data.seat import GroundedTest, SeatTest, read_specs
from vlbias.errors import InputError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def seat_spec(**overrides) -> dict:
    spec = {
        "targ1": {"category": "Male", "examples": ["man", "boy"]},
        "targ2": {"category": "Female", "examples": ["woman", "girl"]},
        "attr1": {"category": "Career", "examples": ["office", "salary"]},
        "attr2": {"category": "Family", "examples": ["home", "children"]},
    }
    spec.update(overrides)
    return spec


def write(path: Path, spec: dict, indent: int | None = 2) -> Path:
    path.write_text(json.dumps(spec, indent=indent))
    return path


@pytest.mark.skipif(not (DATA / "seat").is_dir(), reason="shared/data not beside the repository")
def test_reads_every_public_seat_spec():
    tests = {t.name: t for t in read_specs(DATA / "seat")}
    assert sorted(tests) == ["sent-weat6", "sent-weat8", "weat6", "weat8"]
    weat6 = tests["weat6"]
    assert isinstance(weat6, SeatTest)
    assert (
        weat6.targ1.category,
        weat6.targ1.examples[:2],
        weat6.attr2.examples[-1],
    ) == ("MaleNames", ["John", "Paul"], "relatives")
    assert [len(s.examples) for s in tests["sent-weat6"].sets] == [64, 64, 101, 112]


@pytest.mark.skipif(
    not (DATA / "grounded_weat").is_dir(),
    reason="shared/data not beside the repository",
)
def test_reads_every_public_grounded_spec_and_reports_their_duplicates():
    tests = read_specs(DATA / "grounded_weat")
    assert len(tests) == 37 and all(isinstance(t, GroundedTest) for t in tests)
    weat6 = next(t for t in tests if t.path == DATA / "grounded_weat" / "coco" / "weat6.jsonl")
    assert weat6.test_types == ["word"]
    assert weat6.targ1.pairs()[0] == ("John", "COCO_val2014_000000410554.jpg")
    assert (
        len(weat6.attr1.pairs("MaleNames")),
        len(weat6.attr1.pairs("FemaleNames")),
    ) == (16, 15)
    # coco/weat6 lists one attribute image twice (a duplicate JSON key): kept once and reported
    assert [d["item"] for d in weat6.duplicates] == [f"{weat6.path}: key 'COCO_val2014_000000036450.jpg'"]
    sent = next(t for t in tests if t.path.name == "sent-weat6.jsonl" and t.path.parent.name == "coco")
    assert sent.targ1.pairs()[1] == (
        "That is John.",
        "COCO_val2014_000000254167.jpg",
    )  # a bare "1", not [1]


def test_one_object_per_line_and_pretty_printed_give_the_same_test(tmp_path):
    lines = tmp_path / "lines.jsonl"
    lines.write_text(json.dumps(seat_spec()) + "\n" + json.dumps(seat_spec()) + "\n")
    pretty = read_specs(write(tmp_path / "pretty.jsonl", seat_spec()))
    assert [t.name for t in read_specs(lines)] == ["lines:0", "lines:1"]
    assert read_specs(lines)[1].sets == pretty[0].sets


def test_duplicates_are_dropped_and_reported(tmp_path):
    spec = seat_spec(
        targ1={"category": "Male", "examples": ["man", "boy", "man", "kid"]},
        targ2={"category": "Female", "examples": ["woman", "girl", "kid"]},
    )
    test = read_specs(write(tmp_path / "dup.jsonl", spec))[0]
    assert test.targ1.examples == ["man", "boy"] and test.targ2.examples == [
        "woman",
        "girl",
    ]
    assert [d["item"] for d in test.duplicates] == [
        "dup/targ1: 'man'",
        "dup/targ1+targ2: 'kid'",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {k: v for k, v in seat_spec().items() if k != "attr2"},
            r"bad\.jsonl: line 1: the spec has no key 'attr2'",
        ),
        (
            seat_spec(attr1={"category": "Career"}),
            r"bad\.jsonl: line \d+: attr1 has no key 'examples'",
        ),
        (
            seat_spec(targ2={"category": "F", "examples": []}),
            r"set targ2 \(F\) is empty",
        ),
        (
            seat_spec(targ1={"category": "M", "examples": "man"}),
            r"key targ1\.examples should be a list",
        ),
    ],
)
def test_bad_seat_specs_name_file_line_and_key(tmp_path, spec, message):
    with pytest.raises(InputError, match=message):
        read_specs(write(tmp_path / "bad.jsonl", spec))


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(seat_spec()) + "\n{not json\n")
    with pytest.raises(InputError, match=r"broken\.jsonl: line 2 is not valid JSON"):
        read_specs(path)


def grounded_spec() -> dict:
    return {
        "test_types": ["word"],
        "targ1": {
            "category": "Man",
            "captions": {"0": "man"},
            "images": {"m.png": [0]},
        },
        "targ2": {
            "category": "Woman",
            "captions": {"0": "woman"},
            "images": {"w.png": [0]},
        },
        "attr1": {
            "category": "A",
            "captions": {"0": "cooking"},
            "Man_Images": {"ma.png": [0]},
            "Woman_Images": {"wa.png": [0]},
        },
        "attr2": {
            "category": "B",
            "captions": {"0": "driving"},
            "Man_Images": {"mb.png": [0]},
            "Woman_Images": {"wb.png": [0]},
        },
    }


def test_grounded_spec_errors_name_the_key(tmp_path):
    spec = grounded_spec()
    del spec["attr2"]["Woman_Images"]
    with pytest.raises(InputError, match=r"g\.jsonl: line \d+: attr2 has no key 'Woman_Images'"):
        read_specs(write(tmp_path / "g.jsonl", spec))
    spec = grounded_spec()
    spec["targ1"]["images"]["m.png"] = [0, 3]
    with pytest.raises(InputError, match=r"targ1\.images\['m\.png'\] refers to caption\(s\) \['3'\]"):
        read_specs(write(tmp_path / "g.jsonl", spec))
    spec = grounded_spec()
    spec["test_types"] = ["words"]
    with pytest.raises(InputError, match=r"test_types \['words'\] should be a non-empty subset"):
        read_specs(write(tmp_path / "g.jsonl", spec))


def test_missing_path_is_named(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_specs(tmp_path / "nowhere")

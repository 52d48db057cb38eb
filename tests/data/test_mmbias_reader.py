"""The MMBias reader: the real phrases JSON and valence images, group names, folder layout, bad input."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlbias.data.mmbias import (
    TABLE2_PAIRS,
    group_id,
    read_group_images,
    read_mmbias,
    read_phrases,
    read_valence_images,
)
from vlbias.errors import InputError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mmbias"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared MMBias data not beside the repository")


def save_image(path: Path, colour=(10, 20, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), colour, dtype=np.uint8)).save(path)


def write_phrases(path: Path, **overrides) -> Path:
    payload = {"pleasant_phrases": ["good"], "unpleasant_phrases": ["bad"], "category_phrases": {"muslim": ["islam"]}}
    payload.update(overrides)
    path.write_text(json.dumps(payload))
    return path


@needs_shared
def test_the_real_phrases_json_parses_with_every_table2_group():
    pleasant, unpleasant, groups = read_phrases(SHARED / "textual_phrases.json")
    assert len(pleasant) == 60 and len(unpleasant) == 60
    assert pleasant[:2] == ["saint", "amazing"] and unpleasant[0] == "fragile"
    assert len(groups) == 18
    assert {g for pair in TABLE2_PAIRS for g in pair} == set(groups)  # every key is used by a Table 2 pair
    assert groups["no disability"][:2] == ["health", "healthy"]  # key "No disability"
    assert groups["american"][0] == "James" and len(groups["lgbt"]) == len(groups["heterosexual"]) == 15
    assert all(len(phrases) == 20 for g, phrases in groups.items() if g not in ("lgbt", "heterosexual"))


@needs_shared
def test_the_real_valence_images_are_50_readable_images_each():
    images, unreadable, missing = read_valence_images(SHARED / "valence_images")
    assert {k: len(v) for k, v in images.items()} == {"pleasant": 50, "unpleasant": 50}
    assert unreadable == [] and missing == []


def test_group_ids_ignore_case_separators_and_resolve_the_papers_names():
    assert group_id("  No_Disability ") == "no disability" == group_id("Abled") == group_id("non-disabled")
    assert group_id("Islam") == "muslim" and group_id("Judaism") == "jewish" and group_id("Hetero") == "heterosexual"
    assert group_id("Physical Disability") == "disability" and group_id("LGBTQ") == "lgbt"
    assert group_id("mental_disability") == "mental disability"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"pleasant_phrases": []}, "attribute set 'pleasant_phrases' is empty"),
        ({"unpleasant_phrases": ["bad", 3]}, r"unpleasant_phrases\[1\] should be a non-empty string but is 3"),
        ({"unpleasant_phrases": ["bad", "  "]}, r"unpleasant_phrases\[1\] should be a non-empty string"),
        (
            {"category_phrases": {"Muslim": ["a"], "muslim ": ["b"]}},
            "keys 'Muslim' and 'muslim ' both name group 'muslim'",
        ),
        ({"category_phrases": ["muslim"]}, "should map group names to phrase lists but is list"),
    ],
)
def test_bad_phrase_files_are_refused_naming_the_key(tmp_path, overrides, message):
    with pytest.raises(InputError, match=message):
        read_phrases(write_phrases(tmp_path / "p.json", **overrides))


def test_missing_key_and_bad_json_name_the_file(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"pleasant_phrases": ["a"]}))
    with pytest.raises(InputError, match=r"p\.json.*missing key\(s\) \['unpleasant_phrases', 'category_phrases'\]"):
        read_phrases(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="is not valid JSON"):
        read_phrases(path)
    with pytest.raises(InputError, match="does not exist"):
        read_phrases(tmp_path / "absent.json")


def test_group_images_follow_category_group_layout_and_list_unreadable_files(tmp_path):
    root = tmp_path / "images"
    save_image(root / "Religion" / "Islam" / "b.png")
    save_image(root / "Religion" / "Islam" / "a.jpg")
    (root / "Religion" / "Islam" / "broken.jpg").write_bytes(b"not an image")
    (root / "Religion" / "Islam" / "notes.txt").write_text("ignored: not an image suffix")
    save_image(root / "Religion" / "Islam" / ".hidden.jpg")
    save_image(root / "Disability" / "No_Disability" / "x.jpg")
    (root / "Disability" / "Mental disability").mkdir()
    images, folders, unreadable = read_group_images(root)
    assert [p.name for p in images["muslim"]] == ["a.jpg", "b.png"]
    assert images["no disability"][0].name == "x.jpg" and images["mental disability"] == []
    assert folders["muslim"] == root / "Religion" / "Islam"
    assert [u["item"] for u in unreadable] == [str(root / "Religion" / "Islam" / "broken.jpg")]
    assert "could not be decoded" in unreadable[0]["reason"]


def test_a_group_under_two_categories_is_refused(tmp_path):
    save_image(tmp_path / "Religion" / "Muslim" / "a.jpg")
    save_image(tmp_path / "Nationality" / "islam" / "a.jpg")
    with pytest.raises(InputError, match="both name group 'muslim'"):
        read_group_images(tmp_path)


def test_read_mmbias_records_missing_folders_and_takes_parts_from_elsewhere(tmp_path):
    write_phrases(tmp_path / "textual_phrases.json")
    data = read_mmbias(tmp_path)
    assert data.group_images == {} and data.valence_images == {}
    assert data.missing_images == [{"item": str(tmp_path / "images"), "reason": "group image folder does not exist"}]
    assert [m["item"] for m in data.missing_valence] == [
        str(tmp_path / "valence_images" / "Pleasant"),
        str(tmp_path / "valence_images" / "Unpleasant"),
    ]
    elsewhere = tmp_path / "elsewhere"
    write_phrases(tmp_path / "other.json", category_phrases={"Arab": ["Omar"]})
    save_image(elsewhere / "imgs" / "Nationality" / "Arab" / "1.jpg")
    save_image(elsewhere / "valence" / "PLEASANT" / "1.jpg")
    save_image(elsewhere / "valence" / "unpleasant" / "1.jpg")
    data = read_mmbias(tmp_path, phrases="other.json", images=elsewhere / "imgs", valence_images=elsewhere / "valence")
    assert data.group_phrases == {"arab": ["Omar"]} and len(data.group_images["arab"]) == 1
    assert {k: len(v) for k, v in data.valence_images.items()} == {"pleasant": 1, "unpleasant": 1}
    assert data.missing_images == data.missing_valence == []

"""The UTKFace reader on generated files named as the release names them: both name forms (``.jpg`` and
``.jpg.chip.jpg``), the public names that miss the race field, and every malformed name skipped by name."""

import pytest

from tests.data.faces import write_image
from vlbias.data.utkface import RACES, parse_name, read_utkface
from vlbias.errors import InputError

GOOD = [
    "1_0_2_20161219140623097.jpg.chip.jpg",  # aligned and cropped: a baby boy, Asian
    "26_1_3_20170119180435537.jpg",  # in the wild: a woman, Indian
    "116_1_4_20170120134921760.jpg.chip.jpg",  # the oldest age documented, race Others
]
BAD = {
    "39_1_20170116174525125.jpg.chip.jpg": "3 fields where [age]_[gender]_[race]_[date&time] has 4",  # public name
    "61_1_20170109150557335.jpg.chip.jpg": "3 fields where",  # another public name without race
    "30_2_0_20170117120403395.jpg": "gender code 2 is not 0 (male) or 1 (female)",
    "30_0_5_20170117120403395.jpg": "race code 5 is not one of 0 White, 1 Black, 2 Asian, 3 Indian, 4 Others",
    "117_0_0_20170117120403395.jpg": "age 117 is outside 0-116",
    "x_0_0_20170117120403395.jpg": "are not all whole numbers",
    "30_0_0_1_20170117120403395.jpg": "5 fields where",
    "30_0_0_20170117120403395.png": "not named [age]_[gender]_[race]_[date&time].jpg",
    "30_0_0_20170117120403395.chip.jpg": "not named",
}


def test_reads_both_name_forms_with_their_labels(tmp_path):
    for name in GOOD:
        write_image(tmp_path / name)
    (tmp_path / "README.txt").write_text("not an image")  # passed over
    (tmp_path / ".hidden.jpg").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    gallery = read_utkface(tmp_path)
    assert (gallery.dataset, gallery.split, gallery.image_root, gallery.variant) == ("UTKFace", "all", tmp_path, "")
    assert gallery.images == tuple(sorted(GOOD))
    assert gallery.labels == {
        "age": (116, 1, 26),  # sorted by name: "116_..." before "1_0_..."
        "gender": ("Female", "Male", "Female"),
        "race": ("Others", "Asian", "Indian"),
    }
    assert gallery.values["race"] == RACES and gallery.values["age"] == tuple(range(117))
    assert gallery.groups("race") == {"White": [], "Black": [], "Asian": [1], "Indian": [2], "Others": [0]}
    assert gallery.skipped == ()


def test_the_release_folder_inside_root_is_read(tmp_path):
    write_image(tmp_path / "UTKFace" / GOOD[0])
    gallery = read_utkface(tmp_path)
    assert gallery.image_root == tmp_path / "UTKFace" and gallery.images == (GOOD[0],)


def test_malformed_names_are_skipped_by_name_never_guessed(tmp_path):
    for name in [*GOOD, *BAD]:
        write_image(tmp_path / name)
    gallery = read_utkface(tmp_path)
    assert gallery.images == tuple(sorted(GOOD))
    reasons = {entry["item"]: entry["reason"] for entry in gallery.skipped}
    assert set(reasons) == set(BAD)
    for name, reason in BAD.items():
        assert reason in reasons[name] and reasons[name].startswith("file name ")
    assert "it is not guessed" in reasons["39_1_20170116174525125.jpg.chip.jpg"]


def test_a_dangling_link_is_a_missing_image(tmp_path):
    write_image(tmp_path / GOOD[0])
    (tmp_path / GOOD[1]).symlink_to(tmp_path / "gone.jpg")
    gallery = read_utkface(tmp_path)
    assert gallery.images == (GOOD[0],)
    assert gallery.skipped == ({"item": GOOD[1], "reason": f"image file {GOOD[1]!r} is missing"},)


def test_a_missing_or_empty_folder_is_one_error(tmp_path):
    with pytest.raises(InputError, match=r"UTKFace folder '.*nowhere' does not exist; expected the images named"):
        read_utkface(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(InputError, match=r"holds no image; expected the images named \[age\]_\[gender\]"):
        read_utkface(tmp_path)


def test_parse_name_reads_the_codes():
    assert parse_name("0_0_0_20170110215648859.jpg") == ({"age": 0, "gender": "Male", "race": "White"}, "")
    assert parse_name("45_1_1_20170109150557335.jpg.chip.jpg")[0] == {"age": 45, "gender": "Female", "race": "Black"}

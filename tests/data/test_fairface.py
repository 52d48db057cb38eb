"""The FairFace reader on generated files in the release's layout: both padding folders, the age groups as strings,
the manifest warning, and every malformed row skipped (or file refused) naming the file and row."""

import warnings
from pathlib import Path

import pytest

from tests.data.faces import FAIRFACE_HEADER as HEADER
from tests.data.faces import write_fairface, write_image
from vlbias.data.fairface import AGES, PADDING_FOLDERS, RACES, read_fairface
from vlbias.errors import ConfigError, InputError

ROWS = [
    "val/1.jpg,3-9,Male,East Asian,False\n",
    "val/2.jpg,more than 70,Female,Latino_Hispanic,True\n",
    "val/3.jpg,50-59,Female,Middle Eastern,True\n",
]


def _release(root: Path, folders=(0.25,), rows=ROWS, split="val") -> Path:
    """FairFace as the release unpacks: the label file in ``root``, images 1-3 in each padding folder."""
    return write_fairface(root, rows, [f"{k}.jpg" for k in range(1, 4)], split, folders)


def _read(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few rows, where the release lists thousands
        return read_fairface(*args, **kwargs)


def test_reads_the_release_layout_with_its_labels_as_written(tmp_path):
    gallery = _read(_release(tmp_path), "val")
    assert gallery.dataset == "FairFace" and gallery.split == "val" and gallery.variant == "padding 0.25"
    assert gallery.image_root == tmp_path / PADDING_FOLDERS[0.25]
    assert gallery.images == ("val/1.jpg", "val/2.jpg", "val/3.jpg")
    assert gallery.labels["age"] == ("3-9", "more than 70", "50-59")
    assert gallery.labels["gender"] == ("Male", "Female", "Female")
    assert gallery.labels["race"] == ("East Asian", "Latino_Hispanic", "Middle Eastern")
    assert gallery.labels["service_test"] == (False, True, True)
    assert gallery.values["age"] == AGES and gallery.values["race"] == RACES and len(RACES) == 7
    assert gallery.groups("gender") == {"Male": [0], "Female": [1, 2]}
    assert gallery.groups("age")["0-2"] == []  # an empty group is listed
    with pytest.raises(
        ConfigError, match="`attribute` to be one of FairFace's age, gender, race, service_test but got 'Male'"
    ):
        gallery.groups("Male")
    assert all(path.is_file() for path in gallery.image_paths) and gallery.skipped == ()


@pytest.mark.parametrize("padding", [0.25, 1.25])
def test_either_padding_folder_as_the_root_with_the_labels_beside_or_inside_it(tmp_path, padding):
    root = _release(tmp_path, folders=(padding,))
    folder = root / PADDING_FOLDERS[padding]
    assert _read(folder, "val").variant == f"padding {padding}"  # labels beside the folder
    (root / "fairface_label_val.csv").rename(folder / "fairface_label_val.csv")
    gallery = _read(folder, "val", padding=padding)  # labels inside it
    assert (gallery.image_root, len(gallery)) == (folder, 3)
    assert _read(root, "val").variant == f"padding {padding}"  # the one folder there is


def test_both_padding_folders_need_a_choice(tmp_path):
    root = _release(tmp_path, folders=(0.25, 1.25))
    with pytest.raises(ConfigError, match="holds both image folders.*choose one with `padding`"):
        _read(root, "val")
    assert _read(root, "val", padding=1.25).image_root == root / PADDING_FOLDERS[1.25]
    with pytest.raises(ConfigError, match="`padding` is 1.25 but .* holds padding 0.25"):
        _read(root / PADDING_FOLDERS[0.25], "val", padding=1.25)
    with pytest.raises(ConfigError, match="`padding` to be one of 0.25, 1.25 but got 0.5"):
        _read(root, "val", padding=0.5)


def test_a_folder_with_train_and_val_directly_is_read_with_the_padding_given(tmp_path):
    (tmp_path / "fairface_label_train.csv").write_text(HEADER + "train/1.jpg,20-29,Male,White,True\n")
    write_image(tmp_path / "train" / "1.jpg")
    assert _read(tmp_path, "train").variant == ""  # padding not known
    assert _read(tmp_path, "train", padding=1.25).variant == "padding 1.25"
    with pytest.raises(InputError, match="has no fairface-img-margin125-trainval/ for padding 1.25"):
        _read(_release(tmp_path / "other"), "val", padding=1.25)


def test_the_manifest_count_is_a_warning_naming_both_counts(tmp_path):
    with pytest.warns(UserWarning, match="lists 3 images; the release lists 10,954"):
        gallery = read_fairface(_release(tmp_path), "val")
    assert len(gallery) == 3


def test_malformed_rows_are_skipped_naming_the_file_and_row(tmp_path):
    rows = ROWS + [
        "val/1.jpg,3-9,Male,East Asian,False\n",  # row 5: a repeat
        "val/9.jpg,3-9,Male,White,False\n",  # 6: no such image
        "val/2.jpg,70+,Male,White,False\n",  # 7: an age group not documented
        "val/2.jpg,3-9,male,White,False\n",  # 8: gender spelled otherwise
        "val/2.jpg,3-9,Male,Asian,False\n",  # 9: UTKFace's race, not FairFace's
        "val/2.jpg,3-9,Male,White,yes\n",  # 10: service_test not True/False
        "val/2.jpg,3-9,Male\n",  # 11: too few fields
        "train/1.jpg,3-9,Male,White,False\n",  # 12: another split's image
        "../secret.jpg,3-9,Male,White,False\n",  # 13: outside the split folder
        "val/notes.txt,3-9,Male,White,False\n",  # 14: not an image
    ]
    gallery = _read(_release(tmp_path, rows=rows), "val")
    assert len(gallery) == 3
    reasons = {entry["item"]: entry["reason"] for entry in gallery.skipped}
    assert list(reasons) == [f"fairface_label_val.csv row {row}" for row in range(5, 15)]
    row = "fairface_label_val.csv row {}".format
    assert (
        reasons[row(5)]
        == "image 'val/1.jpg' listed twice: fairface_label_val.csv row 5 repeats fairface_label_val.csv row 2"
    )
    assert reasons[row(6)] == "image file 'val/9.jpg' is missing"
    assert reasons[row(7)].startswith("age '70+' is not one of the documented values ('0-2', '3-9'")
    assert "gender 'male' is not one of the documented values ('Male', 'Female')" == reasons[row(8)]
    assert reasons[row(9)].startswith("race 'Asian' is not one of")
    assert reasons[row(10)] == "service_test 'yes' is not one of the documented values (False, True)"
    assert reasons[row(11)] == "expected 5 fields (file,age,gender,race,service_test) but got 3"
    assert reasons[row(12)] == "file 'train/1.jpg' is not val/<name> (expected e.g. val/1.jpg)"
    assert reasons[row(13)].startswith("file '../secret.jpg' is not val/<name>")
    assert reasons[row(14)].startswith("file 'val/notes.txt' has no image suffix")


@pytest.mark.parametrize(
    "header, message",
    [
        ("file,age,gender,service_test\n", r"lacks \['race'\]; expected file,age,gender,race,service_test"),
        ("", r"header \[\] lacks"),
        ("image,age,gender,race,service_test\n", r"lacks \['file'\]"),
    ],
)
def test_a_wrong_header_is_one_error_naming_the_file(tmp_path, header, message):
    root = _release(tmp_path)
    (root / "fairface_label_val.csv").write_text(header)
    with pytest.raises(InputError, match=f"fairface_label_val.csv'.*{message}"):
        _read(root, "val")


def test_missing_files_and_folders_are_one_error(tmp_path):
    root = _release(tmp_path)
    with pytest.raises(InputError, match=r"fairface_label_train.csv' does not exist; expected fairface_label_train"):
        _read(root, "train")
    with pytest.raises(ConfigError, match="`split` to be one of train, val but got 'test'"):
        _read(root, "test")
    (root / "fairface_label_train.csv").write_text(HEADER)
    with pytest.raises(InputError, match=r"image folder '.*margin025-trainval/train' does not exist"):
        _read(root, "train")
    (root / "fairface_label_val.csv").write_bytes(HEADER.encode() + b"val/1.jpg,3-9,Male,Wh\xefte,False\n")
    with pytest.raises(InputError, match=r"line 2, column 22, field 'race': byte 0xef is not UTF-8"):
        _read(root, "val")

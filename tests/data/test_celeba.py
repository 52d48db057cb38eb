"""The CelebA reader on generated files in the release's layout: the count and names header lines, -1/1 values
with runs of spaces, the partition file, both folder layouts, and every malformed line skipped (or file refused)
naming the file and line."""

import shutil
import warnings
from pathlib import Path

import pytest

from tests.data.faces import celeba_row, write_celeba
from vlbias.data.celeba import ATTRIBUTES, read_celeba
from vlbias.errors import ConfigError, InputError

NAMES = [f"{k:06d}.jpg" for k in range(1, 5)]
PARTITION = "000001.jpg 0\n000002.jpg 2\n000003.jpg 2\n000004.jpg 1\n"


ROWS = [
    celeba_row(NAMES[0], {"Male", "Young"}),
    celeba_row(NAMES[1], {"Blond_Hair", "Smiling"}),
    celeba_row(NAMES[2], {"Male", "Eyeglasses", "5_o_Clock_Shadow"}),
    celeba_row(NAMES[3], set()),
]


def _release(root: Path, rows=ROWS, partition=PARTITION, count=None, folders=False) -> Path:
    """CelebA in ``root``: flat (as torchvision lays it out), or in the release's Anno/, Eval/, Img/ folders."""
    return write_celeba(root, rows, partition, NAMES, count, folders)


def _read(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few rows, where the release lists 202,599
        return read_celeba(*args, **kwargs)


def test_reads_a_split_with_its_40_attributes_and_gender(tmp_path):
    gallery = _read(_release(tmp_path), "test")
    assert (gallery.dataset, gallery.split, gallery.image_root) == ("CelebA", "test", tmp_path / "img_align_celeba")
    assert gallery.images == ("000002.jpg", "000003.jpg")
    assert gallery.attributes == (*ATTRIBUTES, "gender") and len(ATTRIBUTES) == 40
    assert gallery.labels["Blond_Hair"] == (True, False) and gallery.labels["Smiling"] == (True, False)
    assert gallery.labels["Male"] == (False, True) and gallery.labels["gender"] == ("Female", "Male")
    assert gallery.labels["5_o_Clock_Shadow"] == (False, True) and gallery.labels["Young"] == (False, False)
    assert gallery.values["Bald"] == (False, True) and gallery.values["gender"] == ("Male", "Female")
    assert gallery.groups("Eyeglasses") == {False: [0], True: [1]}
    assert gallery.skipped == ()
    assert _read(tmp_path, "train").images == ("000001.jpg",)
    assert _read(tmp_path, "val").labels["gender"] == ("Female",)


def test_the_release_folders_and_windows_line_ends_are_read(tmp_path):
    root = _release(tmp_path, folders=True)
    for path in (root / "Anno" / "list_attr_celeba.txt", root / "Eval" / "list_eval_partition.txt"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    gallery = _read(root, "test")
    assert gallery.image_root == root / "Img" / "img_align_celeba" and len(gallery) == 2


def test_counts_are_warnings_naming_both(tmp_path):
    with pytest.warns(UserWarning) as caught:
        read_celeba(_release(tmp_path, count=5), "test")
    messages = [str(warning.message) for warning in caught]
    assert any("line 1 says 5 rows; it holds 4" in message for message in messages)
    assert any("list_attr_celeba.txt' lists 4 images; the release lists 202,599" in message for message in messages)
    assert any("list_eval_partition.txt' lists 4 images; the release lists 202,599" in message for message in messages)


def test_malformed_lines_are_skipped_naming_the_file_and_line(tmp_path):
    rows = ROWS + [
        celeba_row(NAMES[1], set()),  # line 7: a repeat
        celeba_row("000009.jpg", set()),  # 8: in the partition file, but no image
        celeba_row("000010.jpg", set()),  # 9: not in the partition file
        celeba_row("000011.jpg", set()).replace("-1", " 0", 1),  # 10: a 0 value
        "000012.jpg  1 -1\n",  # 11: too few values
        celeba_row("sub/000013.jpg", set()),  # 12: a path, not a file name
        "\n",  # a blank line holds no row
    ]
    partition = PARTITION + "000009.jpg 2\n000011.jpg 2\n000012.jpg 2\nsub/000013.jpg 2\n000002.jpg 1\n000014.jpg\n"
    gallery = _read(_release(tmp_path, rows=rows, partition=partition), "test")
    assert gallery.images == ("000002.jpg", "000003.jpg")
    reasons = {entry["item"]: entry["reason"] for entry in gallery.skipped}
    assert reasons == {
        "list_eval_partition.txt line 9": "image '000002.jpg' listed twice: line 9 repeats line 2",
        "list_eval_partition.txt line 10": "expected '<image> 0|1|2' (0 train, 1 val, 2 test) but got '000014.jpg'",
        "list_attr_celeba.txt line 7": "image '000002.jpg' listed twice: list_attr_celeba.txt line 7 repeats "
        "list_attr_celeba.txt line 4",
        "list_attr_celeba.txt line 8": "image file '000009.jpg' is missing",
        "list_attr_celeba.txt line 9": "image '000010.jpg' is not listed in list_eval_partition.txt",
        "list_attr_celeba.txt line 10": "5_o_Clock_Shadow '0' is not -1 or 1",
        "list_attr_celeba.txt line 11": "expected an image name and 40 values but got 3 fields",
        "list_attr_celeba.txt line 12": "image 'sub/000013.jpg' is not a file name with an image suffix "
        "(expected e.g. 000001.jpg)",
    }


def test_a_partition_code_outside_0_1_2_is_skipped(tmp_path):
    gallery = _read(_release(tmp_path, partition=PARTITION.replace("000003.jpg 2", "000003.jpg 3")), "test")
    assert gallery.images == ("000002.jpg",)
    assert {entry["item"] for entry in gallery.skipped} == {
        "list_eval_partition.txt line 3",
        "list_attr_celeba.txt line 5",  # then not in the partition
    }


@pytest.mark.parametrize(
    "header, message",
    [
        (lambda names: f"{' '.join(names)}\n", r"line 1 is '5_o_Clock_Shadow.*expected the number of rows"),
        (
            lambda names: f"4\n{' '.join(names[:-1])}\n",
            r"line 2 should name the 40 .*missing \['Young'\], unexpected \[\]",
        ),
        (lambda names: f"4\n{' '.join(names)} Tall\n", r"unexpected \['Tall'\], 41 names"),
        (lambda names: "", r"line 1 is '000001.jpg -1 -1 -1 -1 -1 -1 -1 -1 -1 -1\.\.\.'"),  # no header lines
    ],
)
def test_a_wrong_header_is_one_error_naming_the_file(tmp_path, header, message):
    root = _release(tmp_path)
    (root / "list_attr_celeba.txt").write_text(header(list(ATTRIBUTES)) + "".join(ROWS))
    with pytest.raises(InputError, match=f"list_attr_celeba.txt'.*{message}"):
        _read(root, "test")


def test_missing_files_are_one_error(tmp_path):
    root = _release(tmp_path)
    with pytest.raises(ConfigError, match="`split` to be one of train, val, test but got 'all'"):
        _read(root, "all")
    (root / "list_eval_partition.txt").unlink()
    with pytest.raises(InputError, match=r"list_eval_partition.txt' does not exist \(nor in Eval/\)"):
        _read(root, "test")
    (root / "list_attr_celeba.txt").unlink()
    with pytest.raises(InputError, match=r"list_attr_celeba.txt' does not exist \(nor in Anno/\)"):
        _read(root, "test")
    other = _release(tmp_path / "other")
    shutil.rmtree(other / "img_align_celeba")
    with pytest.raises(
        InputError, match=r"image folder '.*img_align_celeba' does not exist; expected img_align_celeba/"
    ):
        _read(other, "test")

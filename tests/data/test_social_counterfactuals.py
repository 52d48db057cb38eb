"""The SocialCounterfactuals reader on generated Parquet shards in the Hub's layout (``data/train-NNNNN-of-NNNNN-
<hash>.parquet``, the card's columns, the image as Hugging Face's ``{bytes, path}`` struct): sets grouped, the image
bytes left in the shard until asked for, and every malformed row skipped (or file refused) naming the shard and row."""

import io
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vlbias.data.images import ImageProblem, load_image
from vlbias.data.social_counterfactuals import (
    COLUMNS,
    read_encoded_image,
    read_social_counterfactuals,
)
from vlbias.errors import InputError
from vlbias.models.families.clip import CLIPAdapter

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def _png(shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, shade, shade)).save(buffer, format="PNG")
    return buffer.getvalue()


def _row(cf_set: str, a1: str, a2: str, segment="race-gender", types=("race", "gender"), shade=0, **changes) -> dict:
    row = {
        "image": {"bytes": _png(shade), "path": None},
        "dataset_segment": segment,
        "a1_type": types[0],
        "a2_type": types[1],
        "counterfactual_set": cf_set,
        "caption": f"A picture of a {a1} {a2} plumber",
        "a1": a1,
        "a2": a2,
        "a1a2": f"{a1} {a2}",
    }
    return row | changes


def _shard(path: Path, rows: list[dict], columns=COLUMNS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {
        name: pa.array([row[name] for row in rows], type=IMAGE_TYPE if name == "image" else pa.string())
        for name in columns
    }
    pq.write_table(pa.table(arrays), path, row_group_size=2)  # several row groups per shard
    return path


def _release(root: Path, first: list[dict], second: list[dict]) -> Path:
    _shard(root / "data" / "train-00000-of-00002-0a1b.parquet", first)
    _shard(root / "data" / "train-00001-of-00002-2c3d.parquet", second)
    return root


FIRST = [
    _row("a_picture_of_race_gender_plumber_0", "White", "male", shade=10),
    _row("a_picture_of_race_gender_plumber_0", "White", "female", shade=20),
    _row("a_picture_of_race_gender_plumber_0", "Black", "male", shade=30),
]
SECOND = [
    _row("a_picture_of_physical_gender_chef_4", "obese", "female", "physical-gender", ("physical", "gender"), 40),
    _row("a_picture_of_physical_gender_chef_4", "skinny", "female", "physical-gender", ("physical", "gender"), 50),
]


def _read(root):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few rows, where the release holds 170,832
        return read_social_counterfactuals(root)


def test_reads_the_text_columns_and_groups_the_sets(tmp_path):
    data = _read(_release(tmp_path, FIRST, SECOND))
    assert len(data) == 5 and data.skipped == ()
    first = data.images[0]
    assert (first.shard.name, first.row) == ("train-00000-of-00002-0a1b.parquet", 0)
    assert (first.counterfactual_set, first.dataset_segment, first.a1a2) == (
        "a_picture_of_race_gender_plumber_0",
        "race-gender",
        "White male",
    )
    assert first.caption == "A picture of a White male plumber"
    assert first.attributes == {"race": "White", "gender": "male"}
    assert data.images[4].attributes == {"physical": "skinny", "gender": "female"}
    assert (data.images[4].shard.name, data.images[4].row) == ("train-00001-of-00002-2c3d.parquet", 1)
    assert data.sets() == {
        "a_picture_of_race_gender_plumber_0": [0, 1, 2],
        "a_picture_of_physical_gender_chef_4": [3, 4],
    }


def test_an_images_bytes_are_read_from_its_shard_on_demand(tmp_path):
    data = _read(_release(tmp_path, FIRST, SECOND))
    for image, shade in zip(data.images, (10, 20, 30, 40, 50)):  # rows in the first and later row groups
        assert read_encoded_image(image).data == _png(shade)
    picture = load_image(read_encoded_image(data.images[2]))
    assert picture.size == (8, 8) and picture.getpixel((0, 0)) == (30, 30, 30)
    pixels = CLIPAdapter.tiny().prepare_images([read_encoded_image(image) for image in data.images[:2]])
    assert pixels.shape[0] == 2


def test_undecodable_bytes_are_one_error_naming_shard_and_row(tmp_path):
    rows = [FIRST[0], _row("s", "Black", "male", image={"bytes": b"not a png", "path": "x.png"})]
    data = _read(_release(tmp_path, rows, SECOND))
    with pytest.raises(ImageProblem, match=r"Image from SocialCounterfactuals shard '.*0a1b.parquet', row 1 could not"):
        load_image(read_encoded_image(data.images[1]))


def test_shards_in_the_root_and_the_counts_are_warnings(tmp_path):
    _shard(tmp_path / "train-00000-of-00061-ffff.parquet", FIRST)
    with pytest.warns(UserWarning) as caught:
        data = read_social_counterfactuals(tmp_path)
    messages = [str(warning.message) for warning in caught]
    assert any("holds 1 shards; their names count 61" in message for message in messages)
    assert any("lists 3 images; the release lists 170,832" in message for message in messages)
    assert len(data) == 3


def test_malformed_rows_are_skipped_naming_the_shard_and_row(tmp_path):
    second = [
        *SECOND,
        _row("a_picture_of_race_gender_plumber_0", "White", "female"),  # row 2: a repeat of shard 0 row 1
        _row("set_9", "", "male"),  # 3: an empty value
        _row("set_9", "Black", "male", caption=None),  # 4: a null caption
        _row("set_9", "Black", "male", a1_type="  "),  # 5: a blank type
    ]
    data = _read(_release(tmp_path, FIRST, second))
    assert len(data) == 5
    name = "train-00001-of-00002-2c3d.parquet row {}".format
    assert {entry["item"]: entry["reason"] for entry in data.skipped} == {
        name(2): "counterfactual_set 'a_picture_of_race_gender_plumber_0', a1a2 'White female' listed twice: "
        f"{name(2)} repeats train-00000-of-00002-0a1b.parquet row 1",
        name(3): "empty field(s): a1",
        name(4): "empty field(s): caption",
        name(5): "empty field(s): a1_type",
    }


def test_an_image_without_bytes_is_one_error_naming_shard_and_row(tmp_path):
    rows = [FIRST[0], _row("s", "Black", "male", image={"bytes": None, "path": "x.png"})]
    data = _read(_release(tmp_path, rows, SECOND))
    with pytest.raises(InputError, match=r"train-00000-of-00002-0a1b.parquet', row 1: holds no image bytes"):
        read_encoded_image(data.images[1])


def test_missing_or_wrong_files_are_one_error(tmp_path):
    with pytest.raises(InputError, match=r"holds no shard; expected data/train-00000-of-00061-<hash>.parquet"):
        read_social_counterfactuals(tmp_path)
    _shard(tmp_path / "data" / "train-00000-of-00001.parquet", FIRST, columns=[c for c in COLUMNS if c != "a1a2"])
    with pytest.raises(InputError, match=r"train-00000-of-00001.parquet' lacks column\(s\) \['a1a2'\]; it has"):
        _read(tmp_path)
    (tmp_path / "data" / "train-00000-of-00001.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"train-00000-of-00001.parquet' is not a Parquet file that can be read"):
        _read(tmp_path)

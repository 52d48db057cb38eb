"""Caption corpus readers: Karpathy split JSON and ALBEF/LAVIS annotations, both views, and every bad input."""

import json
from pathlib import Path

import pytest
from PIL import Image

from tests.data.corpus import CAPTIONS, write_karpathy_corpus
from vlbias.data.captions import read_captions
from vlbias.errors import ConfigError, InputError


def read(path: Path, split: str, root: Path, **options):
    return read_captions(path, split, root / "images", cache_dir=root / "cache", **options)


def test_karpathy_pairs_fold_restval_into_train(tmp_path):
    corpus = read(write_karpathy_corpus(tmp_path), "train", tmp_path)
    assert corpus.images == ["val2014/m0.png", "val2014/w0.png", "val2014/m1.png", "val2014/w1.png"]
    assert corpus.pairs["caption"] == [c for name in ("m0", "w0", "m1", "w1") for c in CAPTIONS[f"{name}.png"][1]]
    assert corpus.pairs["image_index"] == [0, 0, 1, 1, 2, 3]
    assert corpus.skipped == []


def test_flickr_style_file_without_filepath(tmp_path):
    corpus = read(write_karpathy_corpus(tmp_path, folder=None), "test", tmp_path)
    assert corpus.images == ["m3.png", "w3.png"]


def test_retrieval_view_ground_truth(tmp_path):
    view = read(write_karpathy_corpus(tmp_path), "test", tmp_path).retrieval()
    assert view.captions == ["a man coding", "the man is coding", "a woman cooking"]
    assert view.caption_to_image == [0, 0, 1]
    assert view.image_to_captions == [[0, 1], [2]]
    assert view.image_paths == [tmp_path / "images" / "val2014" / name for name in ("m3.png", "w3.png")]


def test_albef_train_and_eval_annotations(tmp_path):
    write_karpathy_corpus(tmp_path)
    train = tmp_path / "coco_train.json"
    train.write_text(json.dumps([
        {"image": "val2014/m0.png", "caption": "a man cooking", "image_id": 0},
        {"image": "val2014/w0.png", "caption": "a woman coding", "image_id": 1},
        {"image": "val2014/m0.png", "caption": "a photo of a man", "image_id": 0},
        {"image": "val2014/w0.png", "caption": " ", "image_id": 1},
    ]))  # fmt: skip
    corpus = read(train, "train", tmp_path)
    assert corpus.images == ["val2014/m0.png", "val2014/w0.png"]
    assert corpus.pairs["image_index"] == [0, 1, 0]  # an image recurs once per caption: merged, not a repeat
    assert corpus.skipped == [{"item": "val2014/w0.png caption 0", "reason": "empty caption (entry 3)"}]
    test = tmp_path / "coco_test.json"
    test.write_text(json.dumps([{"image": "val2014/m3.png", "caption": ["a man coding", "the man is coding"]},
                                {"image": "val2014/w3.png", "caption": ["a woman cooking"]}]))  # fmt: skip
    view = read(test, "test", tmp_path).retrieval()
    assert view.image_to_captions == [[0, 1], [2]] and view.caption_to_image == [0, 0, 1]


def test_missing_and_corrupt_images_are_skipped_and_named(tmp_path):
    path = write_karpathy_corpus(tmp_path)
    (tmp_path / "images" / "val2014" / "m3.png").unlink()
    (tmp_path / "images" / "val2014" / "w3.png").write_bytes(b"not a png")
    cheap = read(path, "test", tmp_path)
    assert cheap.images == ["val2014/w3.png"]  # existence only: the corrupt file is not decoded
    assert [entry["item"] for entry in cheap.skipped] == ["val2014/m3.png"]
    assert "is missing" in cheap.skipped[0]["reason"]
    (tmp_path / "images" / "val2014" / "m2.png").write_bytes(b"not a png")
    verified = read(path, "val", tmp_path, verify_images=True)
    assert [entry["item"] for entry in verified.skipped] == ["val2014/m2.png"]
    assert "could not be decoded" in verified.skipped[0]["reason"]
    with pytest.raises(InputError, match=r"split 'test' has no usable image and caption \(2 entries skipped: "
                       r"val2014/m3.png: .*is missing"):  # fmt: skip
        read(path, "test", tmp_path, verify_images=True)


def test_repeats_and_empty_captions_are_counted_skips(tmp_path):
    extra = [
        {"filepath": "val2014", "filename": "m0.png", "split": "test", "sentences": [{"raw": "a man"}]},
        {"filepath": "val2014", "filename": "x.png", "split": "test", "sentences": []},
        {"filepath": "val2014", "filename": "y.png", "split": "test", "sentences": [{"raw": ""}, {"raw": "  "}]},
        {"filepath": "val2014", "split": "test", "sentences": [{"raw": "a man"}]},
        {"filepath": "val2014/../val2014", "filename": "w3.png", "split": "test", "sentences": [{"raw": "a man"}]},
    ]
    path = write_karpathy_corpus(tmp_path, entries=extra)
    corpus = read(path, "test", tmp_path)
    assert corpus.images == ["val2014/m3.png", "val2014/w3.png"]
    assert corpus.skipped == [
        {"item": "val2014/m0.png", "reason": "image listed twice: entry 8 repeats entry 0"},
        {"item": "val2014/x.png", "reason": "empty caption list (entry 9)"},
        {"item": "val2014/y.png", "reason": "all 2 captions are empty (entry 10)"},
        {"item": "entry 11", "reason": "entry without `filename` (entry 11)"},
        {"item": "val2014/../val2014/w3.png", "reason": "image listed twice: entry 12 repeats entry 7"},
    ]


def test_a_num_proc_read_equals_the_serial_one(tmp_path):
    path = write_karpathy_corpus(tmp_path)
    serial, parallel = read(path, "train", tmp_path), read(path, "train", tmp_path, num_proc=2, verify_images=True)
    assert parallel.images == serial.images and parallel.pairs.to_dict() == serial.pairs.to_dict()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "does not exist"),
        ('{"images": [ {"filename": 1,}', "not valid karpathy JSON"),
        ('{"dataset": "coco", "imgs": []}', "has no `images` key"),
        ("images: []", "is not a Karpathy split JSON"),
        ('[{"image": "a.png", "caption": "x"}, {"image": ', "not valid annotations JSON"),
        ('{"images": []}', r'lists no image: `images`, {"images": \[...\]} is empty; expected at least one entry'),
        ("[]", "lists no image: the array is empty"),
    ],
    ids=["missing-file", "bad-json", "no-images-key", "not-json", "bad-annotations", "no-images", "empty-array"],
)
def test_files_that_are_no_corpus_raise_naming_the_file(tmp_path, content, match):
    path = tmp_path / "dataset.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=match) as error:
        read(path, "train", tmp_path)
    assert str(path) in str(error.value)


def test_a_split_missing_from_the_file_names_the_splits_it_has(tmp_path):
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps({"images": [{"filename": "a.png", "split": "train", "sentences": [{"raw": "a"}]}]}))
    with pytest.raises(InputError, match=r"no entry of split 'test'; its splits are \['train'\]"):
        read(path, "test", tmp_path)


def test_an_unknown_split_name_lists_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match="one of train, val, test but got 'restval'"):
        read(write_karpathy_corpus(tmp_path), "restval", tmp_path)


def test_an_image_path_leaving_the_image_root_is_skipped_not_read(tmp_path):
    """``../outside.png`` (a real file beside ``image_root``) and an absolute path are skipped with the reason;
    a ``..`` that stays inside the root is kept."""
    extra = [
        {"filepath": "..", "filename": "outside.png", "split": "test", "sentences": [{"raw": "a man"}]},
        {"filename": str(tmp_path / "abs.png"), "split": "test", "sentences": [{"raw": "a woman"}]},
        {"filepath": "val2014/../val2014", "filename": "in.png", "split": "val", "sentences": [{"raw": "a man"}]},
    ]
    path = write_karpathy_corpus(tmp_path, entries=extra)
    Image.new("RGB", (8, 8)).save(tmp_path / "outside.png")  # there, beside image_root: never to be read
    Image.new("RGB", (8, 8)).save(tmp_path / "abs.png")
    Image.new("RGB", (8, 8)).save(tmp_path / "images" / "val2014" / "in.png")
    corpus = read(path, "test", tmp_path, verify_images=True)
    assert corpus.images == ["val2014/m3.png", "val2014/w3.png"]
    assert corpus.skipped == [
        {
            "item": "../outside.png",
            "reason": "image path '../outside.png' leaves `image_root` (expected a path inside it) (entry 8)",
        },
        {
            "item": str(tmp_path / "abs.png"),
            "reason": f"image path {str(tmp_path / 'abs.png')!r} leaves `image_root` (expected a path inside it) "
            "(entry 9)",
        },
    ]
    assert "val2014/../val2014/in.png" in read(path, "val", tmp_path).images


@pytest.mark.parametrize(
    ("listing", "kind", "message"),
    [
        (
            {
                "images": [
                    {"filename": "a.png", "split": "test", "sentences": [{"raw": "a woman cooking"}]},
                    {"filename": "b.png", "split": "test", "sentences": [{"raw": 12345}]},
                ]
            },  # fmt: skip
            "karpathy",
            "entry 1 (image 'b.png'): caption 12345 (int) is not text; expected a string.",
        ),
        (
            {"images": [{"filename": "b.png", "split": "test", "sentences": [{"raw": 12345}]}]},
            "karpathy",
            "entry 0 (image 'b.png'): caption 12345 (int) is not text; expected a string.",
        ),
        (
            [{"image": "a.png", "caption": ["a man", "a man cooking"]}, {"image": "b.png", "caption": ["a man", 7.5]}],
            "annotations",
            "entry 1 (image 'b.png'): caption 7.5 (float) is not text; expected a string.",
        ),
    ],
    ids=["karpathy-mixed", "karpathy-all-numbers", "annotations-list"],
)
def test_a_caption_that_is_not_text_is_refused_naming_the_entry_and_value(tmp_path, listing, kind, message):
    """Arrow's own message quoted a valid caption ("Could not convert 'a woman cooking' ... int64"); the line
    names the file, the entry, its image and the value."""
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(listing))
    with pytest.raises(InputError) as error:
        read(path, "test", tmp_path)
    assert str(error.value) == f"Caption file {str(path)!r}, {message}"


def test_a_null_caption_is_an_empty_one(tmp_path):
    extra = [{"filepath": "val2014", "filename": "n.png", "split": "test", "sentences": [{"raw": None}]}]
    corpus = read(write_karpathy_corpus(tmp_path, entries=extra), "test", tmp_path)
    assert corpus.images == ["val2014/m3.png", "val2014/w3.png"]
    assert corpus.skipped == [{"item": "val2014/n.png", "reason": "all 1 captions are empty (entry 8)"}]

"""The synthetic COCO corpus: read back by the caption reader with its splits, captions and COCO's image sizes;
a rerun finishes it without rewriting what is there; bad settings refused in one line."""

import json

import pytest
from PIL import Image

from vlbias.data.biasworld import ACTIVITIES, GROUPS
from vlbias.data.captions import read_captions
from vlbias.data.synthetic_coco import ANNOTATIONS, COCO_SIZES, split_sizes
from vlbias.experiments.command_line import run
from vlbias.experiments.make_synthetic_coco import make_synthetic_coco

N_IMAGES = 40  # the smallest with every Karpathy split: train 6, restval 10, val 12, test 12


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("coco") / "synthetic"
    make_synthetic_coco(str(out), n_images=N_IMAGES, quality=50)
    return out


def test_the_caption_reader_reads_every_split_with_five_captions_an_image_at_coco_sizes(corpus, tmp_path):
    sizes = split_sizes(N_IMAGES)
    assert sizes == {"train": 6, "restval": 10, "val": 12, "test": 12}
    entries = json.loads((corpus / ANNOTATIONS).read_text())["images"]
    for split, expected in (("train", sizes["train"] + sizes["restval"]), ("val", 12), ("test", 12)):
        read = read_captions(corpus / ANNOTATIONS, split, corpus / "images", cache_dir=tmp_path)
        assert read.skipped == [] and len(read.images) == expected and len(read.pairs) == 5 * expected
    assert {entry["filepath"] for entry in entries if entry["split"] == "train"} == {"train2014"}
    assert {entry["filepath"] for entry in entries if entry["split"] != "train"} == {"val2014"}
    known = {(width, height) for width, height, _ in COCO_SIZES}
    for entry in entries:
        with Image.open(corpus / "images" / entry["filepath"] / entry["filename"]) as picture:
            assert picture.format == "JPEG" and picture.size in known
    cells = [(e["biasworld"]["group"], e["biasworld"]["activity"]) for e in entries if e["split"] == "val"]
    assert sorted(cells) == sorted((group, activity) for group in GROUPS for activity in ACTIVITIES)  # balanced
    first = entries[0]
    assert first["sentences"][0]["sentid"] == 0 and len(first["sentids"]) == 5
    assert first["biasworld"]["activity"] in first["sentences"][0]["raw"]


def test_a_rerun_writes_only_what_is_missing(corpus):
    images = sorted((corpus / "images").rglob("*.jpg"))
    before = {path: path.stat().st_mtime_ns for path in images}
    images[3].unlink()
    (corpus / ANNOTATIONS).unlink()
    make_synthetic_coco(str(corpus), n_images=N_IMAGES, quality=50)
    assert images[3].is_file() and (corpus / ANNOTATIONS).is_file()
    assert {path: path.stat().st_mtime_ns for path in images if path != images[3]} == {
        path: stamp for path, stamp in before.items() if path != images[3]
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--n_images", "24"], "Expected `n_images` to be an integer >= 25 but got 24."),
        (["--quality", "0"], "Expected `quality` to be an integer in [1, 95] but got 0."),
        (["--processes", "0"], "Expected `processes` to be an integer >= 1 but got 0."),
        (["--bias_strength", "1.5"], "Expected `bias_strength` in [0, 1] but got 1.5."),
    ],
)
def test_bad_settings_are_refused_in_one_line(tmp_path, capsys, arguments, message):
    with pytest.raises(SystemExit) as stopped:
        run(make_synthetic_coco, ["--out", str(tmp_path / "out"), *arguments])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert error.endswith(f": error: {message}\n") and error.count("\n") == 1
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_a_folder_of_other_settings_or_content_is_refused_by_name(corpus, tmp_path):
    from vlbias.errors import ConfigError

    with pytest.raises(ConfigError, match=r"other settings \(seed 0 -> 1\); give a new folder or the same settings"):
        make_synthetic_coco(str(corpus), n_images=N_IMAGES, quality=50, seed=1)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="exists and is not a synthetic corpus"):
        make_synthetic_coco(str(tmp_path), n_images=N_IMAGES)

"""CaptionDataModule: batches, workers, the retrieval view, skips, bad configuration, and a FairVLP fast_dev_run."""

import json
import logging

import pytest
import torch
from lightning.pytorch import Trainer

from tests.data.corpus import CAPTIONS, write_karpathy_corpus
from vlbias.data.caption_datamodule import CaptionDataModule
from vlbias.errors import ConfigError, InputError
from vlbias.modules import FairVLP, FairVLPMethod, ModelSpec


def datamodule(root, **options) -> CaptionDataModule:
    path = write_karpathy_corpus(root)
    options = {"image_size": 16, "batch_size": 4, "cache_dir": str(root / "cache"), **options}
    return CaptionDataModule(str(path), str(root / "images"), **options)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_batches_are_resized_unit_pixels_captions_and_image_indices(tmp_path, num_workers):
    data = datamodule(tmp_path, num_workers=num_workers)
    data.prepare_data()
    data.setup("fit")
    batches = list(data.train_dataloader())
    assert [len(batch["caption"]) for batch in batches] == [4, 2]  # 6 training pairs (restval included)
    batch = batches[0]
    assert batch["pixel_values"].shape == (4, 3, 16, 16) and batch["pixel_values"].dtype == torch.float32
    assert 0.0 <= batch["pixel_values"].min() and batch["pixel_values"].max() <= 1.0
    assert all(isinstance(caption, str) for caption in batch["caption"])
    assert batch["image_index"].dtype == torch.long
    train = data.corpora["train"]
    for caption, index in zip(batch["caption"], batch["image_index"].tolist()):
        assert caption in CAPTIONS[train.images[index].split("/")[-1]][1]


def test_the_training_shuffle_is_seeded(tmp_path):
    data = datamodule(tmp_path, batch_size=6)
    data.setup("fit")
    first, again = next(iter(data.train_dataloader())), next(iter(data.train_dataloader()))
    assert first["caption"] == again["caption"]


def test_retrieval_view_of_a_split(tmp_path):
    view = datamodule(tmp_path).retrieval("val")
    assert view.captions == ["a man sewing", "a person sewing", "a woman repairing"]
    assert view.image_to_captions == [[0, 1], [2]] and view.caption_to_image == [0, 0, 1]


def test_skipped_images_are_kept_and_logged_by_name(tmp_path, caplog):
    data = datamodule(tmp_path)
    (tmp_path / "images" / "val2014" / "w3.png").unlink()
    with caplog.at_level(logging.WARNING, logger="vlbias.data.caption_datamodule"):
        data.setup("test")
    assert [entry["item"] for entry in data.skipped["test"]] == ["val2014/w3.png"]
    assert "skipped 1 entries" in caplog.text and "val2014/w3.png" in caplog.text
    assert len(next(iter(data.test_dataloader()))["caption"]) == 2


def test_an_image_that_does_not_decode_in_a_batch_is_dropped_with_a_warning(tmp_path):
    data = datamodule(tmp_path)
    (tmp_path / "images" / "val2014" / "w3.png").write_bytes(b"not a png")  # exists: passes the cheap check
    data.setup("test")
    with pytest.warns(UserWarning, match="w3.png.*could not be decoded"):
        batch = next(iter(data.test_dataloader()))
    assert batch["caption"] == ["a man coding", "the man is coding"]


def test_albef_annotation_files_per_split(tmp_path):
    write_karpathy_corpus(tmp_path)
    files = {}
    for split, names in {"train": ["m0.png", "w0.png"], "val": ["m2.png"]}.items():
        rows = [{"image": f"val2014/{name}", "caption": CAPTIONS[name][1]} for name in names]
        files[split] = str(tmp_path / f"{split}.json")
        (tmp_path / f"{split}.json").write_text(json.dumps(rows))
    data = CaptionDataModule(files, str(tmp_path / "images"), image_size=8, cache_dir=str(tmp_path / "cache"))
    data.setup("fit")
    assert len(data.corpora["train"].pairs) == 4 and len(data.corpora["val"].pairs) == 2
    with pytest.raises(ConfigError, match="no file for split 'test'; it has train, val"):
        data.setup("test")


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"annotations": "nowhere.json"}, InputError, "'nowhere.json' .*does not exist"),
        ({"image_root": "no_images"}, InputError, "Image folder 'no_images'"),
        ({"annotations": {"training": "x.json"}}, ConfigError, r"among train, val, test but got \['training'\]"),
        ({"predict_split": "restval"}, ConfigError, "predict_split"),
    ],
    ids=["missing-annotations", "missing-image-root", "unknown-split-key", "unknown-predict-split"],
)
def test_bad_configuration_is_named(tmp_path, change, error, match):
    path = write_karpathy_corpus(tmp_path)
    options = {"annotations": str(path), "image_root": str(tmp_path / "images"), **change}
    with pytest.raises(error, match=match):
        CaptionDataModule(**options)


@pytest.mark.filterwarnings("ignore")
def test_fairvlp_fast_dev_run_on_a_caption_corpus(tmp_path):
    data = datamodule(tmp_path, image_size=32)
    model = FairVLP(method=FairVLPMethod("gender_swap"), model=ModelSpec("albef", tiny=True), groups=["man", "woman"])
    trainer = Trainer(
        fast_dev_run=True, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
    )  # fmt: skip
    trainer.fit(model, data)
    metrics = trainer.callback_metrics
    assert torch.isfinite(metrics["train/loss"]) and torch.isfinite(metrics["val/loss"])
    assert metrics["train/cf_text_rate"] > 0  # the corpus's "man"/"woman" captions were swapped

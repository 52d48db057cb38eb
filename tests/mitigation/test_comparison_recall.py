"""Retrieval R@K in the debiasing comparison (:func:`vlbias.workflows.comparison.recall_with_intervals`) and the
caption corpus it is measured on (:mod:`vlbias.workflows.caption_corpus`)."""

import json

import pytest
import torch
from PIL import Image

from vlbias.data.biasworld import BiasWorld
from vlbias.errors import ConfigError
from vlbias.metrics.functional.retrieval import retrieval_recall
from vlbias.workflows.caption_corpus import biasworld_captions, file_captions
from vlbias.workflows.comparison import comparison_rows, recall_with_intervals


def swapped_pair():
    """Ten images e_0..e_9 with their own captions, but captions 8 and 9 read e_9 and e_8 (swapped)."""
    images = torch.eye(10)
    captions = images[[0, 1, 2, 3, 4, 5, 6, 7, 9, 8]] * 3.0  # a caption's norm does not change a cosine
    return images, captions, torch.arange(10)


def test_recall_by_hand_equals_the_retrieval_metric():
    """Images 0-7 and their captions find each other first. Caption 8 (e_9) scores 0 with its own image e_8, tied
    with the 8 others that score 0: pessimistic rank 10 of 10 (and so image 8's own caption, rank 1 + 9 = 10): a hit
    at 10, not at 1 or 5. So R@1 = R@5 = 0.8 and R@10 = 1 both ways, as retrieval_recall computes them."""
    images, captions, caption_to_image = swapped_pair()
    out = recall_with_intervals(images, captions, caption_to_image, seed=0)
    direct = retrieval_recall(
        images.double() @ torch.nn.functional.normalize(captions.double(), dim=1).T, caption_to_image
    )
    hand = {"r1": 0.8, "r5": 0.8, "r10": 1.0}
    for prefix in ("txt", "img"):
        for k, value in hand.items():
            recall, low, high = out[f"retrieval_recall/{prefix}_{k}"]
            assert recall == pytest.approx(value) == pytest.approx(float(direct[f"{prefix}_{k}"]))
            if value == 1.0:
                assert (low, high) == (1.0, 1.0)
            else:
                assert 0.0 <= low < value < high <= 1.0
    assert sorted(out) == sorted(f"retrieval_recall/{p}_r{k}" for p in ("txt", "img") for k in (1, 5, 10))
    # the same seed draws the same resamples: the interval does not move between calls
    assert recall_with_intervals(images, captions, caption_to_image, seed=0) == out


def test_recall_goes_into_the_comparison_row_with_its_interval():
    images, captions, caption_to_image = swapped_pair()
    scores = {"accuracy_like": (0.5, 0.4, 0.6), **recall_with_intervals(images, captions, caption_to_image, 0)}
    (row,) = comparison_rows({"none": {}}, {"none": scores})
    assert row["retrieval_recall/img_r10"] == 1.0 and row["retrieval_recall/img_r10/ci_low"] == 1.0
    assert row["accuracy_like"] == 0.5 and row["accuracy_like/ci_high"] == 0.6


def test_a_gallery_smaller_than_k_is_refused_naming_both():
    images = torch.eye(4)
    with pytest.raises(ConfigError, match="at most the text retrieval gallery size 4 but got 10"):
        recall_with_intervals(images, images, torch.arange(4), seed=0)


def test_biasworld_corpus_is_the_test_split_with_its_own_captions():
    world = BiasWorld(eval_per_combination=1, n_train=8)
    corpus = biasworld_captions(world)
    assert corpus.captions == [item.caption for item in world.items("test")]
    assert corpus.caption_to_image.tolist() == list(range(len(corpus.captions))) == list(range(len(corpus.images)))


def test_a_caption_file_gives_its_test_split_with_the_image_of_each_caption(tmp_path):
    for name in ("a.png", "b.png"):
        Image.new("RGB", (4, 4)).save(tmp_path / name)
    images = [
        {"filename": "a.png", "split": "test", "sentences": [{"raw": "one"}, {"raw": "two"}]},
        {"filename": "b.png", "split": "test", "sentences": [{"raw": "three"}]},
        {"filename": "a.png", "split": "train", "sentences": [{"raw": "four"}]},
    ]
    (tmp_path / "dataset.json").write_text(json.dumps({"images": images}))
    corpus = file_captions(str(tmp_path / "dataset.json"), None)  # the images beside the file
    assert corpus.images == [tmp_path / "a.png", tmp_path / "b.png"]
    assert corpus.captions == ["one", "two", "three"] and corpus.caption_to_image.tolist() == [0, 0, 1]

"""Retrieval R@K: hand-computed ranks on small matrices (ties, several captions per image, an image without
captions), the metric equal to the functional twin whatever the sharding, and bad input refused."""

import pytest
import torch
from torch.testing import assert_close

from vlbias.errors import ConfigError, InputError
from vlbias.metrics import RetrievalRecall
from vlbias.metrics.functional import retrieval_ranks, retrieval_recall

# 3 images, 5 captions: image 0 has captions 0, 1; image 1 has 2, 3, 4; image 2 has none
CAPTION_TO_IMAGE = torch.tensor([0, 0, 1, 1, 1])
SCORES = torch.tensor(
    [
        # c0   c1   c2   c3   c4
        [0.2, 0.9, 0.9, 0.1, 0.0],  # image 0: best truth c1 = 0.9 ties wrong c2 -> rank 2
        [0.5, 0.4, 0.3, 0.6, 0.1],  # image 1: best truth c3 = 0.6 beats c0 = 0.5 -> rank 1
        [0.9, 0.8, 0.7, 0.6, 0.5],  # image 2: no caption -> excluded, counted
    ]
)
# IR, per caption (column) the rank of its image: c0 col (.2,.5,.9), truth 0 -> 3; c1 (.9,.4,.8) -> 1;
# c2 (.9,.3,.7), truth 1 -> 3; c3 (.1,.6,.6) truth 1 ties image 2 -> 2; c4 (0,.1,.5) -> 2
TEXT_RANKS, IMAGE_RANKS = torch.tensor([2, 1, 0]), torch.tensor([3, 1, 3, 2, 2])


def test_ranks_by_hand():
    text, image = retrieval_ranks(SCORES, CAPTION_TO_IMAGE)
    assert text.tolist() == TEXT_RANKS.tolist() and image.tolist() == IMAGE_RANKS.tolist()


def test_recall_by_hand():
    out = retrieval_recall(SCORES, CAPTION_TO_IMAGE, ks=(1, 2, 3))
    expected = {
        "txt_r1": 1 / 2,  # of the 2 images with captions, image 1 at rank 1
        "txt_r2": 1.0,
        "txt_r3": 1.0,
        "txt_r_mean": (1 / 2 + 1 + 1) / 3,
        "img_r1": 1 / 5,
        "img_r2": 3 / 5,
        "img_r3": 1.0,
        "img_r_mean": (1 / 5 + 3 / 5 + 1) / 3,
    }
    for key, value in expected.items():
        assert_close(out[key], torch.tensor(value, dtype=torch.float64), msg=key)
    assert_close(
        out["r_mean"], torch.tensor((expected["txt_r_mean"] + expected["img_r_mean"]) / 2, dtype=torch.float64)
    )
    assert int(out["txt_missing"]) == 1


def test_ties_are_pessimistic_and_other_truths_do_not_count():
    # image 0's two captions tie each other at the top: rank 1; a wrong caption tying them: rank 2
    scores = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert retrieval_ranks(scores, torch.tensor([0, 0, 1]))[0].tolist() == [1, 1]
    scores = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
    assert retrieval_ranks(scores, torch.tensor([0, 0, 1]))[0].tolist() == [2, 1]
    # constant rows (e.g. -inf outside the re-ranked candidates) are never a hit at K < gallery
    constant = torch.full((2, 4), float("-inf"))
    text, image = retrieval_ranks(constant, torch.tensor([0, 0, 1, 1]))
    assert text.tolist() == [3, 3] and image.tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("ks", [(6,), (1, 4)])
def test_k_larger_than_a_gallery_is_refused(ks):
    # 3 images: K = 4 does not fit image retrieval; K = 6 fits neither
    with pytest.raises(ConfigError, match="Expected argument `ks` to be at most the .* gallery size"):
        retrieval_recall(SCORES, CAPTION_TO_IMAGE, ks=ks)
    metric = RetrievalRecall(ks=ks)
    with pytest.raises(ConfigError, match="gallery size"):
        metric.update(SCORES.T, torch.arange(5), CAPTION_TO_IMAGE, direction="image")


def test_bad_input_is_refused():
    with pytest.raises(InputError, match="Expected argument `caption_to_image` to hold indices in"):
        retrieval_recall(SCORES, torch.tensor([0, 0, 1, 1, 3]), ks=(1,))
    with pytest.raises(InputError, match="to hold no NaN"):
        retrieval_recall(SCORES.clone().fill_(float("nan")), CAPTION_TO_IMAGE, ks=(1,))
    with pytest.raises(InputError, match="`direction` to be one of"):
        RetrievalRecall(ks=(1,)).update(SCORES, torch.arange(3), CAPTION_TO_IMAGE, direction="both")
    with pytest.raises(ConfigError, match="positive integers"):
        RetrievalRecall(ks=(0,))
    only_image_queries = RetrievalRecall(ks=(1,))
    only_image_queries.update(SCORES.T, torch.arange(5), CAPTION_TO_IMAGE, direction="image")
    with pytest.raises(InputError, match="at least one txt retrieval query"):
        only_image_queries.compute()


def test_image_scores_are_used_for_image_retrieval():
    flipped = -SCORES
    out = retrieval_recall(SCORES, CAPTION_TO_IMAGE, ks=(1,), image_scores=flipped)
    assert_close(out["txt_r1"], torch.tensor(0.5, dtype=torch.float64))
    _, image = retrieval_ranks(flipped, CAPTION_TO_IMAGE)
    assert_close(out["img_r1"], (image <= 1).double().mean())


def test_metric_equals_functional_whatever_the_shards():
    g = torch.Generator().manual_seed(0)
    caption_to_image = torch.randint(0, 8, (30,), generator=g)  # some of the 10 images get no caption
    scores = torch.randint(0, 4, (10, 30), generator=g).float()  # many ties
    expected = retrieval_recall(scores, caption_to_image, ks=(1, 5))
    metric = RetrievalRecall(ks=(1, 5))
    for rows in torch.randperm(10, generator=g).split(3):
        metric.update(scores[rows], rows, caption_to_image, direction="text")
    for rows in torch.randperm(30, generator=g).split(7):
        metric.update(scores.T[rows], rows, caption_to_image, direction="image")
    metric.update(scores.T[:4], torch.arange(4), caption_to_image, direction="image")  # a padded shard: repeats
    out = metric.compute()
    assert out.keys() == expected.keys()
    for key in expected:
        assert_close(out[key], expected[key], msg=key)

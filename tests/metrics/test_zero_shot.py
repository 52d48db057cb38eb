"""Zero-shot attribute ranking (MMBias Fig. 5): functional form, the metric class, bad input."""

import pytest
import torch

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.zero_shot import pleasant_share, zero_shot_ranking
from vlbias.metrics.zero_shot import ZeroShotRanking


def test_ranking_by_hand():
    scores = torch.tensor([[0.2, 0.9, 0.4, 0.4], [0.4, 0.5, 0.0, 0.4]])  # means 0.3, 0.7, 0.2, 0.4
    values, indices = zero_shot_ranking(scores, top_k=3)
    assert indices.tolist() == [1, 3, 0]
    torch.testing.assert_close(values, torch.tensor([0.7, 0.4, 0.3]))
    assert pleasant_share(indices, torch.tensor([True, False, False, True])).item() == pytest.approx(2 / 3)


def test_ties_keep_the_word_order():
    values, indices = zero_shot_ranking(torch.ones(2, 5), top_k=3)
    assert indices.tolist() == [0, 1, 2] and values.tolist() == [1.0, 1.0, 1.0]


def test_metric_over_batches_equals_the_functional_form_and_merges_by_sums():
    torch.manual_seed(0)
    scores = torch.rand(3, 4, 6)  # (batches, images, words)
    expected = zero_shot_ranking(scores.reshape(-1, 6).double(), top_k=4)
    metric = ZeroShotRanking(n_words=6, top_k=4)
    for batch in scores:
        metric.update(batch)
    values, indices = metric.compute()
    torch.testing.assert_close(values, expected[0])
    assert indices.tolist() == expected[1].tolist()
    # two "ranks" holding batches 0, 2 and 1: their summed states give the same answer
    rank0, rank1 = ZeroShotRanking(n_words=6, top_k=4), ZeroShotRanking(n_words=6, top_k=4)
    rank0.update(scores[0]); rank0.update(scores[2]); rank1.update(scores[1])
    rank0.score_sum += rank1.score_sum
    rank0.n_images += rank1.n_images
    assert rank0.compute()[1].tolist() == indices.tolist()


def test_bad_input():
    with pytest.raises(ConfigError, match=r"`top_k` to be an integer in \[1, 3\]"):
        zero_shot_ranking(torch.zeros(2, 3), top_k=4)
    with pytest.raises(InputError, match="1 of 6 are NaN or inf"):
        zero_shot_ranking(torch.tensor([[0.1, float("nan"), 0.2], [0.1, 0.2, 0.3]]), top_k=1)
    with pytest.raises(InputError, match="non-empty"):
        zero_shot_ranking(torch.zeros(0, 3), top_k=1)
    metric = ZeroShotRanking(n_words=3, top_k=1)
    with pytest.raises(InputError, match="before any update"), pytest.warns(UserWarning, match="before the ``update``"):
        metric.compute()
    with pytest.raises(InputError, match="3 columns"):
        metric.update(torch.zeros(2, 4))

"""Zero-shot attribute ranking (MMBias Fig. 5): functional form, the metric class, bad input."""

import pytest
import torch

from tests.metrics.ddp import results_per_rank
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
    rank0.update(scores[0])
    rank0.update(scores[2])
    rank1.update(scores[1])
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


# ----------------------------------------------------------------------------- DDP
NUM_BATCHES, N_WORDS, TOP_K = 6, 12, 8
CUTS = [0, 5, 7, 14, 15, 18, 22]  # batch sizes 5, 2, 7, 1, 3, 4: rank 0 holds 15 images, rank 1 holds 7


def ddp_scores():
    return torch.rand(22, N_WORDS, generator=torch.Generator().manual_seed(31))


def run_ranking(batches):
    """compute() of ZeroShotRanking fed with the given batches of image rows."""
    scores, metric = ddp_scores(), ZeroShotRanking(n_words=N_WORDS, top_k=TOP_K)
    for i in batches:
        metric.update(scores[CUTS[i] : CUTS[i + 1]])
    values, indices = metric.compute()
    return {"values": values, "indices": indices}


def test_results_do_not_depend_on_batch_order():
    # what a 2-process gather hands to `compute`: rank 0's batches, then rank 1's
    in_order, gathered_order = run_ranking(range(NUM_BATCHES)), run_ranking([0, 2, 4, 1, 3, 5])
    torch.testing.assert_close(gathered_order["values"], in_order["values"], atol=1e-12, rtol=0)
    assert gathered_order["indices"].tolist() == in_order["indices"].tolist()


def test_ddp_two_processes_match_single_process():
    expected = run_ranking(range(NUM_BATCHES))
    functional = zero_shot_ranking(ddp_scores().double(), top_k=TOP_K)  # one process, all 22 images at once
    torch.testing.assert_close(expected["values"], functional[0], atol=1e-12, rtol=0)
    assert expected["indices"].tolist() == functional[1].tolist()
    assert expected["values"].diff().max() < -1e-3  # no near-ties: the order is decided by the scores
    results = results_per_rank(run_ranking, NUM_BATCHES)
    for result in results:  # every rank ranks the words as one process did
        torch.testing.assert_close(result["values"], expected["values"], atol=1e-12, rtol=0)
        assert result["indices"].tolist() == expected["indices"].tolist()

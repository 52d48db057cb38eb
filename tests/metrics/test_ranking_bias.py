"""Ranking-bias metrics on constructed rankings whose top-K shares are set by hand."""

import math

import pytest
import torch
from torch.testing import assert_close

from vlbias.errors import ConfigError, InputError
from vlbias.metrics import RankingBias
from vlbias.metrics.functional import (
    bias_at_k,
    max_skew_at_k,
    min_skew_at_k,
    ndkl,
    ranking_bias,
    top_attributes,
)
from vlbias.metrics.functional.ranking_bias import SkewConventions

MAN, WOMAN, NEUTRAL = 0, 1, 2
# 8 gallery images; the scores below put them in the order given by each query's ranking
ATTRIBUTES = torch.tensor([MAN, MAN, MAN, MAN, WOMAN, WOMAN, WOMAN, NEUTRAL])


def scores_for(order: list[int]) -> torch.Tensor:
    """A score row ranking the images in ``order`` first (descending), the rest after."""
    row = torch.zeros(len(ATTRIBUTES))
    row[order] = torch.arange(len(order), 0, -1, dtype=torch.float32) + 10
    return row


# query 0: top 4 = 3 men, 1 woman (M, M, W, M); query 1: top 4 = 1 man, 3 women (W, W, M, W)
SCORES = torch.stack([scores_for([0, 1, 4, 2]), scores_for([4, 5, 0, 6])])
TWO = ATTRIBUTES.clamp(max=WOMAN)  # the neutral image counted as a woman, for the binary statistics
EXACT = SkewConventions(eps=0.0)  # Geyik et al.'s formula, unsmoothed


def test_top_attributes_follow_the_scores():
    assert top_attributes(SCORES, ATTRIBUTES, 4).tolist() == [[0, 0, 1, 0], [1, 1, 0, 1]]


def test_skews_by_hand():
    # query 0: shares (3/4, 1/4) vs 1/2 -> skews ln 1.5, ln 0.5; query 1: ln 0.5, ln 1.5
    assert_close(max_skew_at_k(SCORES, TWO, 4, conventions=EXACT), torch.tensor(math.log(1.5), dtype=torch.float64))
    assert_close(min_skew_at_k(SCORES, TWO, 4, conventions=EXACT), torch.tensor(math.log(0.5), dtype=torch.float64))
    # desired shares (0.75, 0.25): query 0 has them exactly (skews 0), query 1 (ln(1/3), ln 3)
    desired = torch.tensor([0.75, 0.25])
    assert_close(
        max_skew_at_k(SCORES, TWO, 4, conventions=SkewConventions(desired, eps=0.0)),
        torch.tensor(math.log(3) / 2, dtype=torch.float64),
    )
    assert_close(
        min_skew_at_k(SCORES, TWO, 4, conventions=SkewConventions(desired, eps=0.0)),
        torch.tensor(math.log(1 / 3) / 2, dtype=torch.float64),
    )


def test_an_absent_attribute_is_smoothed_by_eps():
    men_only = scores_for([0, 1])[None]
    assert min_skew_at_k(men_only, TWO, 2, conventions=EXACT).item() == float("-inf")
    eps = 1e-4
    assert_close(
        min_skew_at_k(men_only, TWO, 2, conventions=SkewConventions(eps=eps)),
        torch.tensor(math.log(eps / (0.5 + eps)), dtype=torch.float64),
    )


def test_ndkl_by_hand():
    # query 0 prefixes: (1, 0), (1, 0), (2/3, 1/3), (3/4, 1/4); KL to (1/2, 1/2) = ln 2 - H(prefix)
    def kl(p):
        return sum(x * math.log(x / 0.5) for x in (p, 1 - p) if x > 0)

    discounts = [1 / math.log2(i + 1) for i in range(1, 5)]
    query0 = sum(d * kl(p) for d, p in zip(discounts, (1, 1, 2 / 3, 3 / 4), strict=True)) / sum(discounts)
    query1 = query0  # the mirror image: same shares with the attributes swapped
    assert_close(ndkl(SCORES, TWO, 4), torch.tensor((query0 + query1) / 2, dtype=torch.float64))
    balanced = scores_for([0, 4, 1, 5])[None]  # M, W, M, W: KL 0 at every even prefix
    expected = (discounts[0] * kl(1) + discounts[2] * kl(2 / 3)) / sum(discounts)
    assert_close(ndkl(balanced, TWO, 4), torch.tensor(expected, dtype=torch.float64))


def test_bias_at_k_by_hand():
    # query 0: (3 - 1) / 4; query 1: (1 - 3) / 4 -> mean 0; top 5 of query 0 adds the neutral image
    assert_close(bias_at_k(SCORES, ATTRIBUTES, 4, num_attributes=3), torch.tensor(0.0, dtype=torch.float64))
    with_neutral = scores_for([0, 1, 4, 2, 7])[None]
    assert_close(bias_at_k(with_neutral, ATTRIBUTES, 5, num_attributes=3), torch.tensor(2 / 5, dtype=torch.float64))
    assert_close(  # groups swapped: the sign flips
        bias_at_k(with_neutral, ATTRIBUTES, 5, num_attributes=3, groups=(WOMAN, MAN)),
        torch.tensor(-2 / 5, dtype=torch.float64),
    )


def test_ranking_bias_and_its_interval():
    out = ranking_bias(SCORES[:1].expand(3, -1), TWO, 4, conventions=EXACT, n_bootstrap=200)  # one query, three times
    assert_close(out["bias"], torch.tensor(0.5, dtype=torch.float64))
    assert_close(out["bias_interval"], torch.tensor([0.5, 0.5], dtype=torch.float64))  # no spread
    out = ranking_bias(SCORES, TWO, 4, conventions=EXACT, n_bootstrap=2000, seed=1)
    low, high = out["bias_interval"].tolist()
    assert -0.5 <= low < 0 < high <= 0.5 and int(out["n_queries"]) == 2
    again = ranking_bias(
        SCORES.flip(0), TWO, 4, conventions=EXACT, n_bootstrap=2000, seed=1
    )  # query order does not matter
    for key in out:
        assert_close(again[key], out[key], msg=key)


def test_metric_equals_functional():
    g = torch.Generator().manual_seed(0)
    scores, attributes = torch.rand(11, 20, generator=g), torch.randint(0, 3, (20,), generator=g)
    options = dict(k=5, num_attributes=3, groups=(0, 1), n_bootstrap=300, seed=4)
    expected = ranking_bias(scores, attributes, **options)
    metric = RankingBias(**options)
    for rows in torch.randperm(11, generator=g).split(4):
        metric.update(scores[rows], attributes)
    out = metric.compute()
    assert out.keys() == expected.keys()
    for key in expected:
        assert_close(out[key], expected[key], msg=key)


def test_bad_input_is_refused():
    with pytest.raises(ConfigError, match=r"Expected argument `k` to be an integer in \[1, 8\]"):
        bias_at_k(SCORES, ATTRIBUTES, 9, num_attributes=3)
    with pytest.raises(InputError, match=r"Expected argument `attributes` to hold values in \[0, 2\)"):
        max_skew_at_k(SCORES, ATTRIBUTES, 4)
    with pytest.raises(ConfigError, match="Expected argument `desired` to be 2 positive shares summing to 1"):
        RankingBias(k=2, conventions=SkewConventions(desired=torch.tensor([0.7, 0.7])))
    with pytest.raises(ConfigError, match="Expected argument `groups` to be two distinct"):
        RankingBias(k=2, groups=(0, 0))
    with pytest.raises(InputError, match="Expected at least one query"), pytest.warns(UserWarning, match="before the"):
        RankingBias(k=2).compute()  # torchmetrics warns of a compute before any update; the refusal follows

"""KL@K against hand computations: uniform, gallery and present desired shares, a value absent from the top K, ties
kept at the cut-off, and the metric class agreeing with the function."""

import math

import pytest
import torch

from vlbias.metrics import RankingBias
from vlbias.metrics.functional import kl_at_k, ranking_bias
from vlbias.metrics.functional.ranking_bias import SkewConventions

ATTRIBUTES = torch.tensor([0, 0, 1, 2, 0, 1])  # gallery shares 3/6, 2/6, 1/6
SCORES = torch.tensor([[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]])  # top 4: values 0, 0, 1, 2 -> shares 1/2, 1/4, 1/4


@pytest.mark.parametrize(
    ("desired", "expected"),
    [
        ("uniform", 0.5 * math.log(0.5 * 3) + 2 * 0.25 * math.log(0.25 * 3)),
        ("gallery", 0.5 * math.log(0.5 / 0.5) + 0.25 * math.log(0.25 / (2 / 6)) + 0.25 * math.log(0.25 / (1 / 6))),
        ("present", 0.5 * math.log(0.5 * 3) + 2 * 0.25 * math.log(0.25 * 3)),  # all three values are present
    ],
)
def test_kl_at_k_equals_the_hand_computation(desired, expected):
    value = kl_at_k(SCORES, ATTRIBUTES, k=4, num_attributes=3, conventions=SkewConventions(desired=desired))
    assert abs(float(value) - expected) < 1e-12, (float(value), expected)


def test_a_value_absent_from_the_top_k_adds_nothing_and_one_absent_from_the_gallery_takes_no_part():
    # top 2: two of value 0 -> 1 ln(1 / (1/2)) under "present" (value 2 is absent from the gallery: no part)
    attributes = torch.tensor([0, 0, 1, 1])
    value = kl_at_k(torch.tensor([[4.0, 3.0, 2.0, 1.0]]), attributes, k=2, num_attributes=3,
                    conventions=SkewConventions(desired="present"))  # fmt: skip
    assert abs(float(value) - math.log(2)) < 1e-12
    # under "uniform" the value absent from the gallery counts at 1/3: 1 ln(1 / (1/3))
    value = kl_at_k(torch.tensor([[4.0, 3.0, 2.0, 1.0]]), attributes, k=2, num_attributes=3)
    assert abs(float(value) - math.log(3)) < 1e-12


def test_ties_kept_at_the_cut_off_count_over_k_as_the_skews_do():
    scores, attributes = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0]]), torch.tensor([0, 1, 1, 0, 1])
    # K = 2, every image tied with the 2nd kept: values 0, 1, 1, 0 over K = 2 -> shares (1, 1)
    kept = kl_at_k(scores, attributes, k=2, conventions=SkewConventions(ties="keep"))
    assert abs(float(kept) - 2 * math.log(2)) < 1e-12
    by_index = kl_at_k(scores, attributes, k=2)  # values 0, 1: the desired shares
    assert abs(float(by_index)) < 1e-12


def test_the_metric_reports_kl_averaged_over_queries_as_the_function_does():
    torch.manual_seed(0)
    scores, attributes = torch.randn(7, 20), torch.randint(0, 3, (20,))
    conventions = SkewConventions(desired="gallery", zero="floor", eps=1e-10)
    metric = RankingBias(k=5, num_attributes=3, conventions=conventions, n_bootstrap=50)
    metric.update(scores[:3], attributes)
    metric.update(scores[3:], attributes)
    out = metric.compute()
    expected = kl_at_k(scores, attributes, k=5, num_attributes=3, conventions=conventions)
    assert abs(float(out["kl"]) - float(expected)) < 1e-12
    functional = ranking_bias(scores, attributes, k=5, num_attributes=3, conventions=conventions, n_bootstrap=50)
    assert torch.equal(out["kl_interval"], functional["kl_interval"])
    # the statistics that were there keep their bootstrap seeds
    assert torch.equal(out["bias_interval"], functional["bias_interval"])

"""The Student-t quantile and interval against scipy, and Precision@K against a hand count, split over updates."""

import math

import pytest
import torch
from scipy import stats

from vlbias.errors import InputError
from vlbias.metrics import PrecisionAtK
from vlbias.metrics.functional.precision import precision_at_k
from vlbias.metrics.functional.t_interval import student_t_quantile, t_interval


@pytest.mark.parametrize("df", [1, 1.5, 2, 3, 4, 9, 30, 200, 10_000])
@pytest.mark.parametrize("probability", [1e-6, 0.0005, 0.025, 0.3, 0.5, 0.6, 0.9, 0.975, 0.995, 0.9995, 1 - 1e-6])
def test_the_t_quantile_agrees_with_scipy(df, probability):
    exact = stats.t.ppf(probability, df)  # df = 1, p = 0.9995: 636.619..., once 3e-9 away
    assert abs(student_t_quantile(probability, df) - exact) < 1e-10 * max(1.0, abs(exact))


def test_the_t_interval_is_scipys_interval_of_the_mean():
    values = torch.tensor([0.31, 0.29, 0.35, 0.30, 0.33], dtype=torch.float64)
    low, high = stats.t.interval(0.9, 4, loc=float(values.mean()), scale=float(values.std()) / math.sqrt(5))
    assert t_interval(values, 0.9).tolist() == pytest.approx([low, high], abs=1e-10)
    with pytest.raises(InputError, match="at least 2 values"):
        t_interval(torch.tensor([1.0]))


def test_precision_at_k_counts_the_relevant_images_of_each_top_k():
    scores = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 2.0, 4.0, 5.0]])
    relevant = torch.tensor([[True, False, True, True, False], [False, False, True, True, True]])
    # query 1: top 3 = images 0, 1, 2 -> 2 relevant; query 2: images 4, 3, then 1 (tied with 2, lower index) -> 2
    assert float(precision_at_k(scores, relevant, 3)) == pytest.approx((2 / 3 + 2 / 3) / 2, abs=1e-15)
    metric = PrecisionAtK(k=3, n_bootstrap=50)
    metric.update(scores[:1], relevant[:1])
    metric.update(scores[1:], relevant[1:])
    out = metric.compute()
    assert float(out["precision"]) == pytest.approx(2 / 3, abs=1e-15) and int(out["n_queries"]) == 2
    with pytest.raises(InputError, match="bool tensor of shape"):
        precision_at_k(scores, relevant.long(), 3)

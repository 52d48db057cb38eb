"""BCa bootstrap intervals of the WEAT-family effect sizes (issue 22), checked against ``scipy.stats.bootstrap``.

Monte-Carlo tolerances: with 20,000 replicates each, the standard deviation of an endpoint over 30 seeds was
measured for our code and for scipy (skewed exponential scores below; ``OMP_NUM_THREADS=1``, scipy 1.17):
12/12 items 0.012 (low) and 0.008 (high) for both; 8/15 items 0.028 / 0.020 (low, ours / scipy) and 0.004 / 0.005
(high); congruence 10/9 targets 0.004-0.005 for both. The means over the 30 seeds agreed within 0.003. Each
tolerance below is 4 standard deviations of the difference of two independent runs,
:math:`4 \\sqrt{sd_{ours}^2 + sd_{scipy}^2}`, and each test also checks that the percentile interval misses the
BCa reference by more than that, so the comparison can tell the two methods apart.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch.testing import assert_close

from vlbias.errors import ConfigError
from vlbias.metrics import GroundedCongruenceTest, WEATTest
from vlbias.metrics.functional import bootstrap, chunks
from vlbias.metrics.functional.bootstrap import _acceleration
from vlbias.metrics.functional.grounded_weat import _congruence_jackknife, _resampled_effect_sizes, congruence_interval
from vlbias.metrics.functional.weat import _effect_size_jackknife, interval_from_associations
from vlbias.options import StatisticsOptions
from vlbias.suites.mmbias import MMBiasSuite
from vlbias.suites.options import MMBiasOptions, WEATOptions, check_suite_options
from vlbias.suites.weat import WEATSuite

N_BOOTSTRAP = 20_000
SIZES = ((12, 12), (8, 15))


def effect_size(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Ross Eq. 3 as the code computes it: mean difference over the sample std (n - 1) of X and Y pooled."""
    pooled = np.concatenate([x, y], axis=axis)
    return (x.mean(axis=axis) - y.mean(axis=axis)) / pooled.std(axis=axis, ddof=1)


def measured_data() -> dict[str, tuple[np.ndarray, ...]]:
    """The data the tolerances were measured on (module docstring), drawn in that order from one generator:
    skewed exponential scores of 12/12 and 8/15 items, then congruence pairs of 10 and 9 targets."""
    rng = np.random.default_rng(1)
    data = {f"{n_x}/{n_y}": (rng.exponential(size=n_x), rng.exponential(size=n_y) * 0.5) for n_x, n_y in SIZES}
    x_own, x_other = rng.normal(0.3, 0.1, 10), rng.normal(0.2, 0.1, 10)
    data["congruence"] = (x_own, x_other, rng.gamma(2, 0.05, 9), rng.normal(0.1, 0.1, 9))
    return data


def scipy_bca(data: tuple[np.ndarray, ...], statistic, seed: int = 0) -> np.ndarray:
    result = stats.bootstrap(
        data, statistic, method="BCa", n_resamples=N_BOOTSTRAP, vectorized=True, rng=np.random.default_rng(seed)
    )
    return np.array(result.confidence_interval)


@pytest.mark.parametrize(("sizes", "tolerance"), [("12/12", (0.07, 0.05)), ("8/15", (0.14, 0.03))])
def test_bca_matches_scipy(sizes, tolerance):
    s_x, s_y = measured_data()[sizes]
    expected = scipy_bca((s_x, s_y), effect_size)
    interval = interval_from_associations(torch.tensor(s_x), torch.tensor(s_y), n_bootstrap=N_BOOTSTRAP, method="bca")
    percentile = interval_from_associations(
        torch.tensor(s_x), torch.tensor(s_y), n_bootstrap=N_BOOTSTRAP, method="percentile"
    )
    tolerance = np.array(tolerance)
    difference, percentile_miss = np.abs(interval.numpy() - expected), np.abs(percentile.numpy() - expected)
    assert (difference < tolerance).all(), f"ours {interval.numpy()}, scipy {expected}, tolerance {tolerance}"
    assert (percentile_miss > tolerance).any(), f"percentile {percentile.numpy()} is as close to scipy's BCa"


def test_congruence_bca_matches_scipy():
    x_own, x_other, y_own, y_other = measured_data()["congruence"]

    def d3(pick_x: np.ndarray, pick_y: np.ndarray, axis: int = -1) -> np.ndarray:  # scipy resamples target indices
        pick_x, pick_y = pick_x.astype(int), pick_y.astype(int)
        d_x = effect_size(x_own[pick_x], x_other[pick_x], axis)
        d_y = effect_size(y_own[pick_y], y_other[pick_y], axis)
        return (np.abs(d_x) + np.abs(d_y)) / 2

    expected = scipy_bca((np.arange(10.0), np.arange(9.0)), d3)
    scores = [torch.tensor(s) for s in (x_own, x_other, y_own, y_other)]
    interval = congruence_interval(*scores, n_bootstrap=N_BOOTSTRAP, method="bca").numpy()
    percentile = congruence_interval(*scores, n_bootstrap=N_BOOTSTRAP, method="percentile").numpy()
    assert (np.abs(interval - expected) < 0.025).all(), f"ours {interval}, scipy {expected}"
    assert (np.abs(percentile - expected) > 0.025).any(), f"percentile {percentile} is as close to scipy's BCa"


def test_acceleration_matches_a_plain_jackknife_loop():
    s_x, s_y = measured_data()["8/15"]
    numerator = denominator = 0.0
    for j, sample in enumerate((s_x, s_y)):  # Efron & Tibshirani Eq. 15.36, written out
        n = len(sample)
        values = []
        for i in range(n):
            rest = np.delete(sample, i)
            values.append(effect_size(rest, s_y) if j == 0 else effect_size(s_x, rest))
        influence = (n - 1) * (np.mean(values) - np.array(values))
        numerator += (influence**3).sum() / n**3
        denominator += (influence**2).sum() / n**2
    expected = numerator / (6 * denominator**1.5)
    acceleration = _acceleration(_effect_size_jackknife(torch.tensor(np.sort(s_x)), torch.tensor(np.sort(s_y))))
    assert_close(acceleration, torch.tensor(expected, dtype=torch.float64), atol=1e-14, rtol=1e-12)


def test_jackknife_and_resamples_do_not_depend_on_the_chunks_that_bound_their_memory(monkeypatch):
    # The jackknife values (n rows of n - 1 scores each) and the congruence's resamples are computed in chunks
    # of about CHUNK_NUMBERS numbers, so memory stays linear in the set sizes. With 64 numbers per chunk (a row
    # or two) they must equal the one-chunk values, up to the order of float64 sums in a row's standard deviation.
    rng = np.random.default_rng(5)
    x_own, x_other, y_own, y_other = (torch.tensor(rng.exponential(size=n)) for n in (23, 23, 17, 17))

    def compute() -> list[torch.Tensor]:
        resampled = _resampled_effect_sizes(x_own, x_other, 300, torch.Generator().manual_seed(0))
        return [
            *_effect_size_jackknife(x_own, y_own),
            *_congruence_jackknife(x_own, x_other, y_own, y_other),
            resampled,
        ]

    whole = compute()
    monkeypatch.setattr(chunks, "CHUNK_NUMBERS", 64)
    chunked = compute()
    assert [len(values) for values in chunked] == [23, 17, 23, 17, 300]
    for got, expected in zip(chunked, whole):
        assert_close(got, expected, rtol=1e-13, atol=1e-15)


def test_bca_of_constant_replicates_is_the_point():
    # One item per set: every replicate is the data, d = (1 - 0) / std([1, 0], ddof=1) = sqrt(2); half the ties
    # count below, so z0 = 0, and no jackknife value varies, so a = 0: the levels stay 2.5 % and 97.5 %.
    interval = interval_from_associations(torch.tensor([1.0]), torch.tensor([0.0]), n_bootstrap=50, method="bca")
    assert_close(interval, torch.full((2,), math.sqrt(2), dtype=torch.float64), atol=1e-15, rtol=0)
    # Constant sets: d = 1 / std([1, 1, 1, 0, 0, 0], ddof=1) = 1 / sqrt(0.3); the jackknife values per set are equal
    interval = interval_from_associations(torch.ones(3), torch.zeros(3), n_bootstrap=50, method="bca")
    assert_close(interval, torch.full((2,), 1 / math.sqrt(0.3), dtype=torch.float64), atol=1e-15, rtol=0)


def test_bca_is_seeded_and_order_free_and_the_default_is_statistics_options():
    s_x, s_y = (torch.tensor(s) for s in measured_data()["12/12"])
    interval = interval_from_associations(s_x, s_y, n_bootstrap=500, seed=4, method="bca")
    assert_close(interval, interval_from_associations(s_x.flip(0), s_y.roll(3), n_bootstrap=500, seed=4, method="bca"))
    percentile = interval_from_associations(s_x, s_y, n_bootstrap=500, seed=4, method="percentile")
    assert not torch.equal(interval, percentile)
    assert StatisticsOptions().interval_method == "percentile"  # the default of every suite without its own
    assert torch.equal(interval_from_associations(s_x, s_y, n_bootstrap=500, seed=4), percentile)


def test_metrics_pass_the_method():
    generator = torch.Generator().manual_seed(0)
    x, y, a, b = (torch.randn(n, 8, generator=generator, dtype=torch.float64) for n in (9, 11, 4, 5))
    results = {}
    for method in ("bca", "percentile"):
        metric = WEATTest(n_bootstrap=300, seed=2, interval_method=method)
        metric.update(x=x, y=y, a=a, b=b)
        s_x, s_y = metric.associations()
        expected = interval_from_associations(s_x, s_y, n_bootstrap=300, seed=2, method=method)
        results[method] = metric.compute()["interval"]
        assert_close(results[method], expected, atol=0, rtol=0)
    assert not torch.equal(results["bca"], results["percentile"])
    scores = [torch.rand(7, generator=generator, dtype=torch.float64) for _ in range(4)]
    congruence = GroundedCongruenceTest(n_bootstrap=300, interval_method="percentile")
    congruence.update(x_own=scores[0], x_other=scores[1], y_own=scores[2], y_other=scores[3])
    expected = congruence_interval(*scores, n_bootstrap=300, method="percentile")
    assert_close(congruence.compute()["interval"], expected, atol=0, rtol=0)


def test_an_unknown_method_is_refused():
    with pytest.raises(ConfigError, match=r"`method` to be one of \('percentile', 'bca'\) but got 'BCa'"):
        interval_from_associations(torch.ones(3), torch.zeros(3), method="BCa")
    with pytest.raises(ConfigError, match=r"`method` .* but got 'studentized'"):
        congruence_interval(torch.ones(3), torch.zeros(3), torch.ones(3), torch.zeros(3), method="studentized")
    with pytest.raises(ConfigError, match=r"`interval_method` .* but got 'normal'"):
        WEATTest(interval_method="normal")
    with pytest.raises(ConfigError, match=r"`interval_method` .* but got 'normal'"):
        check_suite_options("mmbias", {"statistics": {"interval_method": "normal"}})


def test_suites_record_the_method(tmp_path):
    percentile = {"statistics": {"interval_method": "percentile"}}
    assert MMBiasSuite([], {}, MMBiasOptions()).config["statistics"]["interval_method"] == "bca"
    mmbias = MMBiasSuite([], {}, check_suite_options("mmbias", percentile))
    assert mmbias.config["statistics"]["interval_method"] == "percentile"
    sets = {key: {"category": key, "examples": [f"{key} one", f"{key} two"]} for key in ("targ1", "targ2", "attr1")}
    sets["attr2"] = {"category": "attr2", "examples": ["attr2 one", "attr2 two"]}
    (tmp_path / "toy.jsonl").write_text(json.dumps(sets))
    assert WEATSuite.from_path(tmp_path, WEATOptions()).config["statistics"]["interval_method"] == "bca"
    weat = WEATSuite.from_path(tmp_path, check_suite_options("weat", percentile))
    assert weat.config["statistics"]["interval_method"] == "percentile"
    with pytest.raises(ConfigError, match=r"`interval_method` .* but got 'normal'"):
        check_suite_options("weat", {"statistics": {"interval_method": "normal"}})


def test_bca_is_stable_under_rounding_noise_in_the_scores_at_small_sizes(monkeypatch):
    """At 3 items per set many resamples are the original items in another order: their effect sizes tie with the
    observed one up to rounding, and float32-level noise in the scores (the same data embedded in other batches,
    e.g. DDP shards) must not move them across it. Counted exactly, some of the same noises move the interval."""
    s_x = torch.tensor([0.31, 0.12, 0.25], dtype=torch.float64)
    s_y = torch.tensor([-0.05, 0.08, -0.11], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    noises = [1 + 1e-7 * torch.randn(6, generator=generator, dtype=torch.float64) for _ in range(10)]

    def shifts() -> list[float]:
        interval = interval_from_associations(s_x, s_y, n_bootstrap=4000, seed=3, method="bca")
        return [
            float(
                (
                    interval_from_associations(s_x * n[:3], s_y * n[3:], n_bootstrap=4000, seed=3, method="bca")
                    - interval
                )
                .abs()
                .max()
            )
            for n in noises
        ]

    assert max(shifts()) < 1e-5
    monkeypatch.setattr(bootstrap, "TIE_RELATIVE", 0.0)
    assert max(shifts()) > 1e-3

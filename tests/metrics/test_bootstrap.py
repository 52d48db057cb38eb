"""The one percentile interval and the resampled means every metric's interval reads: against a plain definition,
against each copy the metrics used to carry (bit for bit, with each caller's settings), and through the metrics."""

import math

import pytest
import torch
from torch.testing import assert_close

from vlbias.metrics.functional import (
    chunks,
    counterbias_bootstrap,
    counterbias_intervals,
    language_bias_interval,
    ranking_bias,
    shift_summary,
)
from vlbias.metrics.functional.bootstrap import percentile_interval, resampled_means
from vlbias.metrics.functional.ranking_bias import STATISTICS, SkewConventions, _ranking_bias_update

CONFIDENCES = (0.95, 0.9, 0.5, 0.09, 0.051, 0.003)


def replicates(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def plain_percentile(values: list[float], level: float) -> float:
    """Linear interpolation between order statistics at rank ``level * (n - 1)`` (NumPy's default method)."""
    ordered = sorted(values)
    rank = level * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


@pytest.mark.parametrize("confidence", CONFIDENCES)
@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_matches_the_plain_definition(confidence, n):
    values = replicates(n, n)
    expected = [
        plain_percentile(values.tolist(), (1 - confidence) / 2),
        plain_percentile(values.tolist(), (1 + confidence) / 2),
    ]
    assert_close(
        percentile_interval(values, confidence), torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-15
    )
    assert_close(
        percentile_interval(values, confidence, mirrored_upper=True),
        torch.tensor(expected, dtype=torch.float64),
        rtol=0,
        atol=1e-15,
    )


# The copies the metrics carried before there was one function, verbatim but for their names.
def weat_copy(values, confidence):  # weat.bootstrap_interval without BCa (and grounded_weat)
    levels = torch.tensor([(1 - confidence) / 2, (1 + confidence) / 2], dtype=torch.float64)
    return torch.nanquantile(values, levels)


def ranking_copy(values, confidence):  # ranking_bias._bootstrap_interval
    levels = torch.tensor([(1 - confidence) / 2, (1 + confidence) / 2], dtype=torch.float64)
    return torch.quantile(values, levels)


def entity_copy(values, confidence):  # entity_association._percentile_interval
    tail = (1.0 - confidence) / 2.0
    return torch.quantile(values, values.new_tensor([tail, 1.0 - tail]))


def counterbias_copy(values, confidence):  # counterbias_uncertainty._interval
    tail = (1.0 - confidence) / 2.0
    return torch.nanquantile(values, values.new_tensor([tail, 1.0 - tail]), dim=0).movedim(0, -1)


def vlstereoset_copy(values, confidence):  # vlstereoset._percentiles
    alpha = (1.0 - confidence) / 2.0
    return torch.quantile(values, torch.tensor([alpha, 1.0 - alpha], dtype=values.dtype), dim=0)


COPIES = {  # each copy and the settings its metric now passes
    "weat": (weat_copy, {}),
    "ranking_bias": (ranking_copy, {"omit_nan": False}),
    "entity_association": (entity_copy, {"mirrored_upper": True, "omit_nan": False}),
    "counterbias_uncertainty": (counterbias_copy, {"mirrored_upper": True}),
    "vlstereoset": (vlstereoset_copy, {"mirrored_upper": True, "omit_nan": False}),
}


@pytest.mark.parametrize("copy", sorted(COPIES))
def test_equals_every_copy_it_replaced_to_the_last_bit(copy):
    old, settings = COPIES[copy]
    for seed, n in enumerate((1, 3, 10, 333, 1000, 1001, 4096)):
        values = replicates(seed, n)
        if copy in ("weat", "counterbias_uncertainty") and n > 3:
            values[::7] = float("nan")  # undefined replicates, left out
        for confidence in CONFIDENCES:
            assert torch.equal(percentile_interval(values, confidence, **settings), old(values, confidence)), (
                n,
                confidence,
            )
    stacked = replicates(9, 500, 3, 4)  # counterbias reads (R, K, T) at once
    assert torch.equal(percentile_interval(stacked, 0.9, mirrored_upper=True), counterbias_copy(stacked, 0.9))


def test_the_two_upper_levels_differ_only_in_the_last_bit_for_39_coverages():
    differ = [c / 1000 for c in range(1, 1000) if 1 - (1 - c / 1000) / 2 != (1 + c / 1000) / 2]
    assert len(differ) == 39 and {0.003, 0.051, 0.09} <= set(differ)
    assert not {0.5, 0.8, 0.9, 0.95, 0.99} & set(differ)
    for c in differ:
        assert abs((1 - (1 - c) / 2) - (1 + c) / 2) <= 2**-52
    values = replicates(1, 1001)
    moved = [
        c
        for c in differ
        if not torch.equal(percentile_interval(values, c), percentile_interval(values, c, mirrored_upper=True))
    ]
    assert moved, "the setting would not matter: then it should not exist"
    for c in moved:  # the lower end never moves, the upper by rounding only
        low, high = percentile_interval(values, c), percentile_interval(values, c, mirrored_upper=True)
        assert low[0] == high[0] and abs(low[1] - high[1]) < 1e-12


def test_nan_replicates_are_left_out_or_spread():
    values = torch.tensor([1.0, float("nan"), 3.0, 2.0], dtype=torch.float64)
    assert percentile_interval(values, 0.5).tolist() == [1.5, 2.5]
    assert percentile_interval(values, 0.5, omit_nan=False).isnan().all()
    assert percentile_interval(torch.full((5,), float("nan")), 0.5).isnan().all()


def test_shapes_and_dtype():
    assert percentile_interval(replicates(0, 50), 0.9).shape == (2,)
    assert percentile_interval(replicates(0, 50, 3, 4), 0.9).shape == (3, 4, 2)
    assert percentile_interval(replicates(0, 50).float(), 0.9).dtype == torch.float32


def test_a_single_value_has_no_interval_not_a_zero_wide_one():
    generator, reference = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    means = resampled_means(torch.tensor([0.182]), 50, generator)
    assert means.isnan().all()
    assert percentile_interval(means, 0.95).isnan().all()  # was [0.182, 0.182]
    assert percentile_interval(means, 0.95, omit_nan=False).isnan().all()
    torch.randint(1, (50, 1), generator=reference)  # the generator moved as for any n
    assert torch.equal(torch.rand(3, generator=generator), torch.rand(3, generator=reference))


@pytest.mark.parametrize("n", [2, 5, 64, 100])
def test_resampled_means_in_chunks_are_the_draws_of_one_batch(monkeypatch, n):
    # The entity and VLStereoSet intervals drew every replicate at once; the ranking interval drew chunks. Both are
    # the same draws from the generator, so one function serves the three without moving a number.
    values = replicates(n, n)
    at_once = values[torch.randint(n, (777, n), generator=torch.Generator().manual_seed(3))].mean(dim=1)
    assert torch.equal(resampled_means(values, 777, torch.Generator().manual_seed(3)), at_once)
    monkeypatch.setattr(chunks, "CHUNK_NUMBERS", 128)  # chunks of one to a hundred rows
    assert torch.equal(resampled_means(values, 777, torch.Generator().manual_seed(3)), at_once)


def test_the_metrics_read_their_intervals_from_it():
    bias = replicates(1, 30, 2)
    target, direction = torch.arange(30) % 3, 1 - 2 * (torch.arange(30) % 2)
    resampled = counterbias_bootstrap(bias, target, direction, 3, n_bootstrap=200, seed=4)
    got = counterbias_intervals(bias, target, direction, 3, n_bootstrap=200, confidence=0.09, seed=4)["per_target"]
    assert torch.equal(got, percentile_interval(resampled.nanmean(dim=1), 0.09, mirrored_upper=True))

    first, second = replicates(2, 12), replicates(3, 12)
    means = resampled_means(first - second, 300, torch.Generator().manual_seed(5))
    expected = percentile_interval(means, 0.09, mirrored_upper=True, omit_nan=False)
    assert torch.equal(language_bias_interval(first, second, 300, 0.09, 5), expected)

    values = replicates(4, 40)
    means = resampled_means(values.sort().values, 250, torch.Generator().manual_seed(6))
    expected = percentile_interval(means, 0.09, mirrored_upper=True, omit_nan=False)
    assert torch.equal(shift_summary(values, 250, 0.09, 6)["interval"], expected)

    scores, attributes = replicates(5, 25, 6).float(), torch.tensor([0, 1, 0, 1, 1, 0])
    out = ranking_bias(scores, attributes, k=3, n_bootstrap=400, confidence=0.09, seed=7)
    uniform = torch.full((2,), 0.5, dtype=torch.float64)
    per_query = _ranking_bias_update(scores, attributes, 3, 2, SkewConventions(uniform, eps=1e-4), (0, 1))["bias"]
    seed = 7 + STATISTICS.index("bias")  # one seed per statistic
    means = resampled_means(per_query.double().sort().values, 400, torch.Generator().manual_seed(seed))
    assert torch.equal(out["bias_interval"], percentile_interval(means, 0.09, omit_nan=False))


def test_bca_where_every_replicate_lies_on_one_side_is_the_percentile_interval():
    """z0 = ±inf leaves BCa's levels undefined; the statistic is defined on every replicate, so the interval is
    their percentile interval, NaN only where no replicate defines it."""
    from vlbias.metrics.functional.bootstrap import bca_interval

    replicates = torch.linspace(1.0, 2.0, 101, dtype=torch.float64)
    for observed in (0.5, 2.5):
        assert_close(
            bca_interval(replicates, 0.9, torch.tensor(observed, dtype=torch.float64), []),
            percentile_interval(replicates, 0.9),
        )
    undefined = torch.full((10,), math.nan, dtype=torch.float64)
    assert bca_interval(undefined, 0.9, torch.tensor(0.5, dtype=torch.float64), []).isnan().all()


def test_the_interval_of_a_maximum_gap_observed_below_every_resample_is_defined():
    """demographic_parity_difference_max (a maximum over classes, which every resample inflates) observed at 0.031
    with every one of 200 stratified replicates above it: its BCa interval was NaN; now the replicates' percentile
    interval."""
    from vlbias.metrics.functional.group_fairness import group_fairness
    from vlbias.metrics.functional.group_fairness_intervals import group_fairness_intervals

    generator = torch.Generator().manual_seed(0)
    for _ in range(11):  # the 11th draw is such data (found by search)
        target, preds = torch.randint(4, (60,), generator=generator), torch.randint(4, (60,), generator=generator)
        groups = torch.randint(2, (60,), generator=generator)
    observed = group_fairness(preds, target, groups, 4)["demographic_parity_difference_max"]
    low, high = group_fairness_intervals(preds, target, groups, 4, n_bootstrap=200)["demographic_parity_difference_max"]
    assert float(observed) == pytest.approx(0.03125, abs=1e-4)
    assert math.isfinite(low) and observed < low <= high

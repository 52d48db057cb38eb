"""The WEAT permutation test's samplers and unequal set sizes: against exact enumeration, a plain per-permutation
loop and a hand-enumerated example."""

import itertools
import math

import numpy as np
import pytest
import torch

import vlbias.metrics.functional.weat as weat_functional
from vlbias.errors import ConfigError
from vlbias.metrics import WEATTest
from vlbias.metrics.functional import p_value_from_associations, weat_association


def scores(seed: int, n_x: int, n_y: int, shift: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Association-like scores: X shifted up by ``shift`` standard deviations."""
    generator = torch.Generator().manual_seed(seed)
    s_x = torch.randn(n_x, generator=generator, dtype=torch.float64) + shift
    return s_x, torch.randn(n_y, generator=generator, dtype=torch.float64)


def loop_p_value(s_x: torch.Tensor, s_y: torch.Tensor, n_permutations: int, seed: int) -> float:
    """The slow independent reference: one numpy ``rng.permutation`` per re-partition, X_i its first |X| items."""
    pooled, n_x = np.concatenate([s_x.numpy(), s_y.numpy()]), s_x.numel()
    observed = s_x.sum().item()
    rng = np.random.default_rng(seed)
    as_extreme = sum(
        pooled[rng.permutation(pooled.size)[:n_x]].sum() >= observed - 1e-12 for _ in range(n_permutations)
    )
    return (1 + as_extreme) / (1 + n_permutations)


def brute_force_p_value(s_x: torch.Tensor, s_y: torch.Tensor) -> float:
    """Every re-partition into sets of sizes |X| and |Y|, counting sums over X_i >= the observed one."""
    pooled, n_x = s_x.tolist() + s_y.tolist(), s_x.numel()
    observed = sum(s_x.tolist())
    splits = list(itertools.combinations(pooled, n_x))
    return sum(sum(split) >= observed - 1e-12 for split in splits) / len(splits)


def monte_carlo_bound(p: float, *n_permutations: int) -> float:
    """4.5 standard errors of the difference of independent estimates of p (binomial), plus their 1/(1+P) offsets."""
    return 4.5 * math.sqrt(sum(p * (1 - p) / n for n in n_permutations)) + sum(2 / n for n in n_permutations)


# ----------------------------------------------------------------------------- hand-enumerated unequal sizes
def test_unequal_sizes_exact_p_value_by_hand():
    # X = {3, 1} (sum 4), Y = {0, 2, 4}; the C(5, 2) = 10 re-partitions X_i, their sums, and their mean differences
    # mean(X_i) - mean(Y_i) = sum/2 - (10 - sum)/3:
    #   {0,1} 1 -2.5 | {0,2} 2 -1.667 | {0,3} 3 -0.833 | {0,4} 4 0 | {1,2} 3 -0.833
    #   {1,3} 4  0   | {1,4} 5  0.833 | {2,3} 5  0.833 | {2,4} 6 1.667 | {3,4} 7 2.5
    # at least as large as the observed 4 (mean difference 0): {0,4} {1,3} {1,4} {2,3} {2,4} {3,4} -> p = 6/10
    s_x, s_y = torch.tensor([3.0, 1.0]), torch.tensor([0.0, 2.0, 4.0])
    sums = [1, 2, 3, 4, 3, 4, 5, 5, 6, 7]
    mean_differences = [s / 2 - (10 - s) / 3 for s in sums]
    assert sum(s >= 4 for s in sums) == sum(d >= -1e-12 for d in mean_differences) == 6
    assert p_value_from_associations(s_x, s_y, allow_unequal_sizes=True).item() == 6 / 10
    assert p_value_from_associations(s_y, s_x, allow_unequal_sizes=True).item() == brute_force_p_value(s_y, s_x)


def test_sum_difference_mean_difference_and_effect_size_order_repartitions_alike():
    # with the sizes kept, all three statistics are increasing functions of the sum over X_i
    s_x, s_y = scores(0, 4, 7, shift=0.3)
    pooled = torch.cat([s_x, s_y])
    statistics = []
    for chosen in itertools.combinations(range(11), 4):
        in_x = torch.zeros(11, dtype=torch.bool)
        in_x[list(chosen)] = True
        x_i, y_i = pooled[in_x], pooled[~in_x]
        mean_difference = x_i.mean() - y_i.mean()
        statistics.append((x_i.sum(), x_i.sum() - y_i.sum(), mean_difference, mean_difference / pooled.std()))
    by_sum = sorted(statistics, key=lambda row: row[0].item())
    for column in (1, 2, 3):
        values = [row[column].item() for row in by_sum]
        assert all(later >= earlier - 1e-12 for earlier, later in itertools.pairwise(values))


@pytest.mark.parametrize(("n_x", "n_y"), [(1, 5), (3, 5), (6, 4), (7, 9)])
def test_unequal_sizes_exact_matches_brute_force(n_x, n_y):
    s_x, s_y = scores(n_x * 10 + n_y, n_x, n_y, shift=0.5)
    assert p_value_from_associations(s_x, s_y, allow_unequal_sizes=True).item() == brute_force_p_value(s_x, s_y)


def test_allowing_unequal_sizes_changes_nothing_when_sizes_are_equal():
    s_x, s_y = scores(1, 10, 10, shift=0.3)
    assert p_value_from_associations(s_x, s_y, allow_unequal_sizes=True) == p_value_from_associations(s_x, s_y)
    s_x, s_y = scores(2, 40, 40, shift=0.3)
    sampled = [
        p_value_from_associations(s_x, s_y, n_permutations=3000, allow_unequal_sizes=flag) for flag in (False, True)
    ]
    assert sampled[0].item() == sampled[1].item()


# ----------------------------------------------------------------------------- samplers against exact and the loop
@pytest.mark.parametrize(("n_x", "n_y", "shift"), [(12, 12, 0.4), (10, 14, 0.5), (20, 20, 0.3), (12, 20, 0.3)])
@pytest.mark.parametrize("path", ["ranks", "bits"])
def test_sampled_p_value_within_monte_carlo_error_of_exact(monkeypatch, n_x, n_y, shift, path):
    s_x, s_y = scores(n_x + 3 * n_y, n_x, n_y, shift)
    exact = p_value_from_associations(s_x, s_y, exact_limit=10**12, allow_unequal_sizes=True).item()
    assert 0.01 < exact < 0.9
    if path == "bits":  # draw through the random-bit head and the decoded tail, as sets of 32+ items do
        monkeypatch.setattr(weat_functional, "_RANK_BITS", 8)
        monkeypatch.setattr(weat_functional, "_TAIL_ITEMS", 20)
    sampled = p_value_from_associations(s_x, s_y, n_permutations=50_000, exact_limit=0, allow_unequal_sizes=True)
    assert abs(sampled.item() - exact) < monte_carlo_bound(exact, 50_000), (sampled.item(), exact)


@pytest.mark.parametrize(("n_x", "n_y", "shift"), [(33, 33, 0.25), (64, 64, 0.2), (25, 40, 0.3), (40, 90, 0.15)])
def test_sampled_p_value_within_monte_carlo_error_of_a_permutation_loop(n_x, n_y, shift):
    s_x, s_y = scores(n_x * n_y, n_x, n_y, shift)
    fast = p_value_from_associations(s_x, s_y, allow_unequal_sizes=True).item()  # 99,999 re-partitions
    slow = loop_p_value(s_x, s_y, 20_000, seed=1)
    assert 0.005 < slow < 0.9
    assert abs(fast - slow) < monte_carlo_bound(slow, 99_999, 20_000), (fast, slow)


def test_bits_sampler_draws_every_subset_equally_often(monkeypatch):
    # pooled 1, 2, 4, ..., 2^19: a subset's sum is its bit mask. Head of 16 items as random bits with p = 19/128, tail
    # of 4 decoded: all C(20, 3) = 1140 subsets must come up about draws / 1140 times each
    monkeypatch.setattr(weat_functional, "_TAIL_ITEMS", 19)
    draws = 228_000
    sums = weat_functional._sampled_half_sums_by_bits(2.0 ** np.arange(20), 3, draws, np.random.default_rng(2))
    masks, counts = np.unique(sums.astype(np.int64), return_counts=True)
    assert masks.size == 1140 and all(bin(mask).count("1") == 3 for mask in masks)
    expected = draws / 1140
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square < 1139 + 5 * math.sqrt(2 * 1139), chi_square  # chi-square with 1139 degrees of freedom


def test_bits_sampler_pair_frequencies_for_half_splits(monkeypatch):
    # 40 items, halves: every item in X_i with chance 1/2, every pair with chance C(38, 18) / C(40, 20) = 19/78
    monkeypatch.setattr(weat_functional, "_TAIL_ITEMS", 20)
    draws = 40_000
    sums = weat_functional._sampled_half_sums_by_bits(2.0 ** np.arange(40), 20, draws, np.random.default_rng(3))
    chosen = (sums.astype(np.int64)[:, None] >> np.arange(40)) & 1
    assert (chosen.sum(axis=1) == 20).all()
    sigma = math.sqrt(0.25 / draws)
    assert np.abs(chosen.mean(axis=0) - 0.5).max() < 5 * sigma
    pairs = (chosen.T @ chosen / draws)[np.triu_indices(40, 1)]
    assert np.abs(pairs - 19 / 78).max() < 5.5 * math.sqrt(19 / 78 * 59 / 78 / draws)


# ----------------------------------------------------------------------------- seeds, metric, errors
@pytest.mark.parametrize(("n_x", "n_y"), [(25, 25), (64, 64), (25, 40)])
def test_seeded_and_order_free(n_x, n_y):
    s_x, s_y = scores(5, n_x, n_y, shift=0.2)
    p = p_value_from_associations(s_x, s_y, n_permutations=5000, seed=3, allow_unequal_sizes=True)
    again = p_value_from_associations(s_x.flip(0), s_y.roll(3), n_permutations=5000, seed=3, allow_unequal_sizes=True)
    assert p.item() == again.item()
    other = [
        p_value_from_associations(s_x, s_y, n_permutations=5000, seed=seed, allow_unequal_sizes=True) for seed in (4, 5)
    ]
    assert len({p.item(), *(q.item() for q in other)}) > 1  # different seeds draw different re-partitions


def test_weat_test_metric_passes_unequal_sizes_through():
    generator = torch.Generator().manual_seed(0)
    x, y, a, b = (torch.randn(n, 5, generator=generator, dtype=torch.float64) for n in (6, 9, 4, 4))
    expected = p_value_from_associations(weat_association(x, a, b), weat_association(y, a, b), allow_unequal_sizes=True)
    metric = WEATTest(allow_unequal_sizes=True)
    metric.update(x=x, y=y, a=a, b=b)
    assert metric.compute()["p_value"].item() == expected.item()
    default = WEATTest()
    default.update(x=x, y=y, a=a, b=b)
    assert default.compute()["p_value"].isnan()
    with pytest.raises(ConfigError, match="`allow_unequal_sizes` to be True or False but got 'yes'"):
        WEATTest(allow_unequal_sizes="yes")

"""The WEAT permutation test's samplers and unequal set sizes: against exact enumeration, a plain per-permutation
loop and a hand-enumerated example."""

import itertools
import math

import numpy as np
import pytest
import torch

import vlbias.metrics.functional.permutation as permutation
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
def test_sampled_p_value_within_monte_carlo_error_of_exact(n_x, n_y, shift):
    s_x, s_y = scores(n_x + 3 * n_y, n_x, n_y, shift)
    exact = p_value_from_associations(s_x, s_y, exact_limit=10**12, allow_unequal_sizes=True).item()
    assert 0.01 < exact < 0.9
    sampled = p_value_from_associations(s_x, s_y, n_permutations=50_000, exact_limit=0, allow_unequal_sizes=True)
    assert abs(sampled.item() - exact) < monte_carlo_bound(exact, 50_000), (sampled.item(), exact)


@pytest.mark.parametrize(("n_x", "n_y", "shift"), [(33, 33, 0.25), (64, 64, 0.2), (25, 40, 0.3), (40, 90, 0.15)])
def test_sampled_p_value_within_monte_carlo_error_of_a_permutation_loop(n_x, n_y, shift):
    s_x, s_y = scores(n_x * n_y, n_x, n_y, shift)
    fast = p_value_from_associations(s_x, s_y, allow_unequal_sizes=True).item()  # 99,999 re-partitions
    slow = loop_p_value(s_x, s_y, 20_000, seed=1)
    assert 0.005 < slow < 0.9
    assert abs(fast - slow) < monte_carlo_bound(slow, 99_999, 20_000), (fast, slow)


def subsets(total: int, n: int, draws: int, seed: int) -> np.ndarray:
    """``(draws, total)`` 0/1 membership of ``_random_subsets``'s rows (both halves' bits, in item order)."""
    halves = permutation._random_subsets(total, n, draws, np.random.default_rng(seed))
    bits = [np.unpackbits(half.view(np.uint8), axis=1, bitorder="little") for half in halves]
    return np.concatenate([bits[0][:, : total // 2], bits[1][:, : total - total // 2]], axis=1)


def test_subsets_of_unequal_sizes_come_up_equally_often():
    # 20 items, 3 chosen (P(1) of the proposals 5/32, not 3/20): all C(20, 3) = 1140 subsets, each about
    # draws / 1140 times
    draws = 228_000
    chosen = subsets(20, 3, draws, seed=2)
    masks, counts = np.unique(chosen @ (1 << np.arange(20)), return_counts=True)
    assert masks.size == 1140 and (chosen.sum(axis=1) == 3).all()
    expected = draws / 1140
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square < 1139 + 5 * math.sqrt(2 * 1139), chi_square  # chi-square with 1139 degrees of freedom


@pytest.mark.parametrize("total", [40, 131])  # 131: halves of 65 and 66 items, two words per mask, 8-item lanes
def test_item_and_pair_frequencies_of_half_splits(total):
    # every item in X_i with chance n / N, every pair with chance n (n - 1) / (N (N - 1))
    n, draws = total // 2, 40_000
    chosen = subsets(total, n, draws, seed=3).astype(np.float64)
    assert (chosen.sum(axis=1) == n).all()
    share, pair_share = n / total, n * (n - 1) / (total * (total - 1))
    assert np.abs(chosen.mean(axis=0) - share).max() < 5 * math.sqrt(share * (1 - share) / draws)
    pairs = (chosen.T @ chosen / draws)[np.triu_indices(total, 1)]
    assert np.abs(pairs - pair_share).max() < 5.5 * math.sqrt(pair_share * (1 - pair_share) / draws)


def test_proposals_are_topped_up_then_short_counts_drawn_exactly():
    # a first batch of 8 masks of 70 items and three top-ups of at most 8 cannot supply 50 masks of each of the
    # counts 2, 3 and 35: the rest is drawn with exactly those counts
    half = permutation._half(70, [1])
    demand = np.zeros(71, dtype=np.int64)
    demand[[2, 3, 35]] = 50
    words, order, starts = permutation._proposals_by_count(np.random.default_rng(0), half, demand, 8)
    assert (np.diff(starts) >= demand).all()
    supply = np.diff(starts)
    assert supply[2] == supply[3] == 50  # never proposed (chance C(70, 2) / 2^70): drawn exactly, as many as needed
    assert len(words) >= 150 and len(words) - supply[[2, 3]].sum() <= 8 * (1 + permutation._TOP_UPS) + 50
    counts = np.bitwise_count(words).sum(axis=1)
    assert (np.diff(counts[order]) >= 0).all()  # sorted by count
    for count in (2, 3, 35):
        assert (counts[order[starts[count] : starts[count + 1]]] == count).all()


def test_masks_with_exact_counts_are_uniform():
    # 6 items, 3 chosen: all 20 subsets about draws / 20 times each; a 70-item half's masks fill two words
    draws = 20_000
    masks = permutation._masks_with_counts(np.random.default_rng(1), permutation._half(6, [1]), np.full(draws, 3))
    subsets, counts = np.unique(masks[:, 0], return_counts=True)
    assert [bin(int(mask)).count("1") for mask in subsets] == [3] * 20 and subsets.max() < 64
    assert (np.abs(counts - draws / 20) < 5 * math.sqrt(draws * (1 / 20) * (19 / 20))).all(), counts
    wide = permutation._masks_with_counts(np.random.default_rng(2), permutation._half(70, [1]), np.arange(71))
    assert wide.shape == (71, 2) and (np.bitwise_count(wide).sum(axis=1) == np.arange(71)).all()
    assert (wide[:, 1] < 2**6).all()  # no bit beyond item 69


@pytest.mark.parametrize(("share", "digits"), [(0.5, [1]), (25 / 65, [1, 1, 0]), (0.001, None)])
def test_proposal_bits_have_the_rounded_share(share, digits):
    # 25 / 65 = 0.3846 is rounded to 3/8 = 0.011 in binary (least significant digit first: 1, 1, 0)
    found = permutation._bit_digits(share, 32)
    if digits is not None:
        assert found == digits
    p = sum(digit * 2.0 ** (bit - len(found)) for bit, digit in enumerate(found))
    assert abs(32 * (p - share)) <= math.sqrt(32 * share * (1 - share) / 2) / 2  # half a standard deviation
    assert abs(p - share) <= min(share, 1 - share) / 8
    words = permutation._random_words(np.random.default_rng(4), (4000,), found)
    ones = int(np.bitwise_count(words).sum())
    assert abs(ones / (64 * 4000) - p) < 5 * math.sqrt(p * (1 - p) / (64 * 4000))


@pytest.mark.parametrize("total", [50, 131])
def test_count_from_float32_tables_equals_the_exact_count(total):
    # integer scores of very different sizes: float32 keeps about 7 digits of their sums, while every float64 sum of
    # them is exact whatever the order of its terms (below 2^53), so the reference count is the exact one (with
    # real-valued scores a tie at the threshold depends on the order BLAS adds the terms in, which varies by CPU).
    # The thresholds are sums that some rows reach exactly: those rows fall within the float32 margin and are
    # decided by float64 sums
    rng = np.random.default_rng(5)
    pooled = np.sort(rng.integers(-3_000, 4_000, total) * 10.0 ** rng.integers(0, 7, total))
    n, draws = total // 2, 5000
    chosen = subsets(total, n, draws, seed=6)
    sums = chosen @ pooled
    for threshold in (sums[0], sums[1], float(np.median(sums)), sums.max(), sums.min()):
        rng = np.random.default_rng(6)
        count = permutation._count_sums_at_least(pooled, n, draws, threshold, rng)
        assert count == int(np.count_nonzero(sums >= threshold)), threshold


def test_floyd_subsets_come_up_equally_often():
    # 20 items, 3 chosen: all C(20, 3) = 1140 subsets, each about draws / 1140 times
    draws = 228_000
    taken = permutation._floyd_subsets(20, 3, draws, np.random.default_rng(9))
    assert (np.sort(taken, axis=1)[:, 1:] != np.sort(taken, axis=1)[:, :-1]).all()  # distinct items per row
    masks, counts = np.unique((1 << taken).sum(axis=1), return_counts=True)
    assert masks.size == 1140
    expected = draws / 1140
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square < 1139 + 5 * math.sqrt(2 * 1139), chi_square


@pytest.mark.parametrize(("n_x", "n_y"), [(3, 60), (60, 3)])  # X the few items, then Y: X's sum is the total less Y's
def test_few_items_p_value_within_monte_carlo_error_of_exact(n_x, n_y):
    s_x, s_y = scores(n_x + n_y, n_x, n_y, shift=0.8)
    exact = p_value_from_associations(s_x, s_y, allow_unequal_sizes=True).item()  # C(63, 3) = 39,711 re-partitions
    assert 0.01 < exact < 0.9
    sampled = p_value_from_associations(s_x, s_y, n_permutations=50_000, exact_limit=0, allow_unequal_sizes=True)
    assert abs(sampled.item() - exact) < monte_carlo_bound(exact, 50_000), (sampled.item(), exact)


@pytest.mark.parametrize("size", [1e-200, 1e200])
def test_count_of_scores_beyond_float32_range_is_exact(size):
    # float32 holds neither: the scores are scaled by a power of two first, which changes no comparison
    pooled = np.sort(np.random.default_rng(7).standard_normal(40)) * size
    chosen = subsets(40, 20, 3000, seed=8)
    sums = chosen @ pooled
    threshold = float(np.median(sums))
    count = permutation._count_sums_at_least(pooled, 20, 3000, threshold, np.random.default_rng(8))
    assert count == int(np.count_nonzero(sums >= threshold)) == 1500


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

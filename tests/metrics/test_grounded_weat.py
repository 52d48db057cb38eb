"""Grounded-WEAT/SEAT Experiment 3 (congruence): hand-computed values, order independence, the metric class."""

import itertools
import math

import pytest
import torch

from tests.metrics.ddp import results_per_rank
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional import permutation
from vlbias.metrics.functional.grounded_weat import (
    congruence_effect_size,
    congruence_interval,
    congruence_p_value,
    congruence_statistic,
)
from vlbias.metrics.grounded_weat import GroundedCongruenceTest

X_OWN, X_OTHER = torch.tensor([0.3, 0.2, 0.4]), torch.tensor([0.1, 0.1, 0.1])
Y_OWN, Y_OTHER = torch.tensor([0.0, 0.1]), torch.tensor([0.2, 0.2])
SCORES = (X_OWN, X_OTHER, Y_OWN, Y_OTHER)


def test_hand_computed():
    # delta_x = (.2, .1, .3), delta_y = (-.2, -.1): s3 = (|.6| + |-.3|) / 2
    assert congruence_statistic(*SCORES).item() == pytest.approx(0.45)
    # d_X = .2 / std(.3,.2,.4,.1,.1,.1) = .2 / sqrt(.08 / 5); d_Y = -.15 / sqrt(.0275 / 3)
    d_x, d_y = 0.2 / (0.08 / 5) ** 0.5, -0.15 / (0.0275 / 3) ** 0.5
    assert congruence_effect_size(*SCORES).item() == pytest.approx((abs(d_x) + abs(d_y)) / 2)
    # of the 2^5 sign vectors only those with equal signs within X and within Y reach .45: 4 / 32
    assert congruence_p_value(*SCORES).item() == 0.125


def reference_exact_p(x_deltas: list[float], y_deltas: list[float]) -> float:
    """Every sign vector, one at a time; ties (within 1e-9) count as extreme."""
    observed = (abs(sum(x_deltas)) + abs(sum(y_deltas))) / 2
    deltas, as_extreme = x_deltas + y_deltas, 0
    for signs in itertools.product((1, -1), repeat=len(deltas)):
        flipped = [sign * delta for sign, delta in zip(signs, deltas)]
        as_extreme += (abs(sum(flipped[: len(x_deltas)])) + abs(sum(flipped[len(x_deltas) :]))) / 2 >= observed - 1e-9
    return as_extreme / 2 ** len(deltas)


@pytest.mark.parametrize(("seed", "n_x", "n_y"), [(0, 3, 4), (1, 6, 2), (2, 1, 7), (3, 5, 5)])
def test_exact_p_value_matches_reference_enumeration(seed, n_x, n_y):
    generator = torch.Generator().manual_seed(seed)
    # small integers in tenths: many sign vectors tie with the observed value; and a zero difference
    own = torch.randint(0, 5, (n_x + n_y,), generator=generator, dtype=torch.float64) / 10
    other = torch.randint(0, 5, (n_x + n_y,), generator=generator, dtype=torch.float64) / 10
    other[0] = own[0]
    deltas = (own - other).tolist()
    expected = reference_exact_p(deltas[:n_x], deltas[n_x:])
    assert congruence_p_value(own[:n_x], other[:n_x], own[n_x:], other[n_x:]).item() == expected


def test_exact_count_in_chunks_when_one_side_is_large(monkeypatch):
    # 2^3 chunks of the 11-item side (3 head items fixed per chunk) give the same count as one pass
    generator = torch.Generator().manual_seed(5)
    scores = [torch.rand(n, generator=generator, dtype=torch.float64) for n in (11, 11, 3, 3)]
    whole = congruence_p_value(*scores).item()
    monkeypatch.setattr(permutation, "_CHUNK_BITS", 8)
    assert congruence_p_value(*scores).item() == whole
    deltas = [(own - other).tolist() for own, other in ((scores[0], scores[1]), (scores[2], scores[3]))]
    assert whole == reference_exact_p(*deltas)


def binomial_exact_p(x_deltas: list[int], y_deltas: list[int]) -> float:
    """p-value for deltas in {-1, 0, 1}, from binomial coefficients: over the m nonzero deltas of a set,
    S = m - 2K with K ~ Binomial(m, 1/2) whatever their signs; zeros leave S alone."""
    m_x, m_y = sum(map(abs, x_deltas)), sum(map(abs, y_deltas))
    observed = abs(sum(x_deltas)) + abs(sum(y_deltas))
    count = sum(
        math.comb(m_x, k_x) * math.comb(m_y, k_y)
        for k_x in range(m_x + 1)
        for k_y in range(m_y + 1)
        if abs(m_x - 2 * k_x) + abs(m_y - 2 * k_y) >= observed
    )
    return count * 2 ** (len(x_deltas) + len(y_deltas) - m_x - m_y) / 2 ** (len(x_deltas) + len(y_deltas))


@pytest.mark.parametrize(("seed", "n_x", "n_y"), [(8, 10, 10), (25, 23, 1)])  # p = 0.043, 0.064
def test_exact_p_value_at_the_default_limit_matches_binomial_count(monkeypatch, seed, n_x, n_y):
    # 20 targets, and 24 (the most the default exact path takes; 2^3 chunks of 2^20 sums on the 23-item side)
    assert 2 ** (n_x + n_y) <= permutation.SIGN_FLIP_EXACT_LIMIT
    sizes, signed_sums = [], permutation._signed_sums
    monkeypatch.setattr(permutation, "_signed_sums", lambda deltas: sizes.append(len(deltas)) or signed_sums(deltas))
    generator = torch.Generator().manual_seed(seed)
    deltas = torch.randint(-1, 2, (n_x + n_y,), generator=generator, dtype=torch.float64)
    own, other = deltas + 0.5, torch.full_like(deltas, 0.5)
    p_value = congruence_p_value(own[:n_x], other[:n_x], own[n_x:], other[n_x:]).item()
    expected = binomial_exact_p([int(d) for d in deltas[:n_x]], [int(d) for d in deltas[n_x:]])
    assert 0 < p_value <= 1
    assert p_value == expected, f"{p_value} != {expected}"
    assert max(sizes) <= permutation._CHUNK_BITS  # never more than 2^20 sums in one tensor


def test_order_of_targets_does_not_matter():
    generator = torch.Generator().manual_seed(0)
    x_own, x_other, y_own, y_other = (torch.rand(30, generator=generator) for _ in range(4))
    order_x, order_y = (
        torch.randperm(30, generator=generator),
        torch.randperm(30, generator=generator),
    )
    first = (x_own, x_other, y_own, y_other)
    shuffled = (x_own[order_x], x_other[order_x], y_own[order_y], y_other[order_y])
    assert congruence_p_value(*first, n_permutations=999, seed=4) == congruence_p_value(
        *shuffled, n_permutations=999, seed=4
    )
    torch.testing.assert_close(
        congruence_interval(*first, n_bootstrap=200),
        congruence_interval(*shuffled, n_bootstrap=200),
        rtol=0,
        atol=0,
    )


def test_sampled_p_value_is_close_to_the_exact_one():
    generator = torch.Generator().manual_seed(1)
    scores = [torch.rand(8, generator=generator) for _ in range(4)]
    exact = congruence_p_value(*scores).item()
    sampled = congruence_p_value(*scores, n_permutations=20_000, exact_limit=0).item()
    assert abs(exact - sampled) < 4 * (exact * (1 - exact) / 20_000) ** 0.5 + 1e-4


def test_metric_accumulates_batches_like_the_functional():
    metric = GroundedCongruenceTest(n_bootstrap=100)
    metric.update(x_own=X_OWN[:2], x_other=X_OTHER[:2], y_own=Y_OWN, y_other=Y_OTHER)
    metric.update(x_own=X_OWN[2:], x_other=X_OTHER[2:])
    result = metric.compute()
    assert result["p_value"] == congruence_p_value(*SCORES)
    assert result["effect_size"] == congruence_effect_size(*SCORES)
    torch.testing.assert_close(result["interval"], congruence_interval(*SCORES, n_bootstrap=100))


def test_errors():
    with pytest.raises(InputError, match="score the same targets"):
        congruence_statistic(X_OWN, X_OTHER[:2], Y_OWN, Y_OTHER)
    with pytest.raises(InputError, match="non-empty"):
        congruence_effect_size(torch.tensor([]), torch.tensor([]), Y_OWN, Y_OTHER)
    with pytest.raises(InputError, match="together"):
        GroundedCongruenceTest().update(x_own=X_OWN)
    with pytest.raises(ConfigError, match=r"`confidence` to be in \(0, 1\) but got 95"):
        GroundedCongruenceTest(confidence=95)
    with pytest.raises(ConfigError, match="`n_bootstrap` to be a positive integer but got 0"):
        GroundedCongruenceTest(n_bootstrap=0)


# ----------------------------------------------------------------------------- DDP
NUM_BATCHES = 6


def ddp_batches():
    """Six batches of (own, other) score pairs; rank 1 (batches 1, 3, 5) never sees a target of Y."""
    generator = torch.Generator().manual_seed(11)
    x_own, x_other = torch.rand(9, generator=generator) + 0.1, torch.rand(9, generator=generator)
    y_own, y_other = torch.rand(6, generator=generator), torch.rand(6, generator=generator) + 0.05
    return [
        {"x_own": x_own[:2], "x_other": x_other[:2], "y_own": y_own[:4], "y_other": y_other[:4]},
        {"x_own": x_own[2:5], "x_other": x_other[2:5]},
        {"y_own": y_own[4:], "y_other": y_other[4:]},
        {"x_own": x_own[5:6], "x_other": x_other[5:6]},
        {"x_own": x_own[6:7], "x_other": x_other[6:7]},
        {"x_own": x_own[7:], "x_other": x_other[7:]},
    ]


def run_metrics(batches):
    """Sampled (all batches) and exact (even batches only: rank 1 never updates it) congruence tests."""
    parts = ddp_batches()
    sampled = GroundedCongruenceTest(n_permutations=3000, exact_limit=0, n_bootstrap=300, seed=7)
    exact = GroundedCongruenceTest(n_bootstrap=300, seed=7)
    for i in batches:
        sampled.update(**parts[i])
        if i % 2 == 0:
            exact.update(**parts[i])
    return {"sampled": sampled.compute(), "exact": exact.compute()}


def test_results_do_not_depend_on_batch_order():
    # what a 2-process gather hands to `compute`: rank 0's batches, then rank 1's
    in_order, gathered_order = run_metrics(range(NUM_BATCHES)), run_metrics([0, 2, 4, 1, 3, 5])
    for family in ("sampled", "exact"):
        for key, value in in_order[family].items():
            torch.testing.assert_close(gathered_order[family][key], value, atol=0, rtol=0, msg=f"{family}/{key}")


@pytest.mark.slow  # each metric's DDP sync runs in the default suite: tests/metrics/test_ddp_every_metric.py
def test_ddp_two_processes_match_single_process():
    expected = run_metrics(range(NUM_BATCHES))
    assert 1 / 3001 < expected["sampled"]["p_value"].item() < 1  # sampled, not trivially at an end
    assert expected["exact"]["p_value"].item() * 2**9 % 1 == 0  # all 2^(3 + 6) sign vectors enumerated
    results = results_per_rank(run_metrics, NUM_BATCHES)
    for result in results:  # every rank computes the same numbers as one process did
        for family in ("sampled", "exact"):
            assert result[family].keys() == {"effect_size", "statistic", "p_value", "interval", "n_x", "n_y"}
            for key, value in expected[family].items():
                torch.testing.assert_close(result[family][key], value, atol=1e-12, rtol=0, msg=f"{family}/{key}")
            assert result[family]["p_value"].item() == expected[family]["p_value"].item()

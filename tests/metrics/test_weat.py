"""WEAT/SEAT and ITM association tests: hand-computed values, a plain reference, the metrics under DDP."""

import itertools
import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import vlbias.metrics.functional.permutation as permutation
from tests.metrics.ddp import results_per_rank
from vlbias.errors import ConfigError, InputError
from vlbias.metrics import ITMEffectSize, ITMTest, WEATEffectSize, WEATTest
from vlbias.metrics.functional import (
    effect_size_from_associations,
    interval_from_associations,
    itm_association,
    itm_effect_size,
    mean_difference_from_associations,
    p_value_from_associations,
    statistic_from_associations,
    weat_association,
    weat_effect_size,
    weat_effect_size_interval,
    weat_p_value,
    weat_test_statistic,
)


# ----------------------------------------------------------------------------- plain references
def reference_associations(targets: np.ndarray, a: np.ndarray, b: np.ndarray) -> list[float]:
    """s(w, A, B) with explicit loops (Ross Eq. 1)."""

    def cos(u, v):
        return float(np.dot(u, v) / math.sqrt(np.dot(u, u) * np.dot(v, v)))

    return [np.mean([cos(w, x) for x in a]) - np.mean([cos(w, x) for x in b]) for w in targets]


def reference_effect_size(s_x: list[float], s_y: list[float]) -> float:
    return (np.mean(s_x) - np.mean(s_y)) / np.std(s_x + s_y, ddof=1)


def reference_exact_p(s_x: list[float], s_y: list[float]) -> float:
    """May et al.'s exact test written out: every equal split of X ∪ Y, counting sums >= the observed."""
    pooled = s_x + s_y
    observed = sum(pooled[i] for i in range(len(s_x)))
    splits = list(itertools.combinations(range(len(pooled)), len(s_x)))
    return sum(sum(pooled[i] for i in split) >= observed for split in splits) / len(splits)


def random_sets(seed: int, n_x: int, n_y: int, n_a: int = 4, n_b: int = 5, dim: int = 6, shift: float = 0.4):
    generator = torch.Generator().manual_seed(seed)
    a, b = (
        torch.randn(n_a, dim, generator=generator, dtype=torch.float64),
        torch.randn(n_b, dim, generator=generator, dtype=torch.float64),
    )
    x = torch.randn(n_x, dim, generator=generator, dtype=torch.float64) + shift * a.mean(0)  # X leans to A
    y = torch.randn(n_y, dim, generator=generator, dtype=torch.float64) + shift * b.mean(0)
    return x, y, a, b


# ----------------------------------------------------------------------------- hand-computed values
def test_hand_computed_two_by_two():
    # A = {e1}, B = {e2}; x1 = e1, x2 = (0.9, 0.1), y1 = e2, y2 = (0.1, 0.9); |(0.9, 0.1)| = sqrt(0.82) = 0.905539
    # s(x1) = 1 - 0 = 1;  s(x2) = 0.9/0.905539 - 0.1/0.905539 = 0.8/0.905539 = 0.883452;  s(y1) = -1;  s(y2) = -0.883452
    # statistic (Eq. 2) = (1 + 0.883452) - (-1 - 0.883452) = 3.766904
    # d (Eq. 3): numerator 0.941726 + 0.941726 = 1.883452; pooled mean 0,
    #   sample variance (1 + 0.780488 + 1 + 0.780488) / 3 = 1.186992, std 1.089492 -> d = 1.728744
    # p: of the C(4, 2) = 6 splits only X = {x1, x2} reaches sum 1.883452 -> p = 1/6
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1]])
    y = torch.tensor([[0.0, 1.0], [0.1, 0.9]])
    a, b = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert_close(weat_association(x, a, b), torch.tensor([1.0, 0.883452]), atol=1e-6, rtol=0)
    assert weat_test_statistic(x, y, a, b).item() == pytest.approx(3.766904, abs=1e-6)
    assert weat_effect_size(x, y, a, b).item() == pytest.approx(1.728744, abs=1e-6)
    assert weat_p_value(x, y, a, b).item() == 1 / 6


def test_hand_computed_ties_count_as_extreme():
    # pooled scores 1, 1 | 0, 1; observed sum over X = 2; the splits reaching 2 are the 3 pairs of ones -> 3/6
    assert p_value_from_associations(torch.tensor([1.0, 1.0]), torch.tensor([0.0, 1.0])).item() == 0.5
    # all scores equal: every split ties with the observed one -> p = 1; the effect size is 0/0
    zeros = torch.zeros(3)
    assert p_value_from_associations(zeros, zeros).item() == 1.0
    assert p_value_from_associations(zeros, zeros, exact_limit=0, n_permutations=50).item() == 1.0
    assert effect_size_from_associations(zeros, zeros).isnan()


def test_hand_computed_itm_association():
    # no top_k: (0.9 + 0.1 + 0.2)/3 - (0.3 + 0.4 + 0.5)/3 = 0.4 - 0.4 = 0
    # top_k=2:  (0.9 + 0.2)/2 - (0.5 + 0.4)/2 = 0.55 - 0.45 = 0.1;  top_k=1: 0.9 - 0.5 = 0.4
    match_a, match_b = torch.tensor([[0.9, 0.1, 0.2]]), torch.tensor([[0.3, 0.4, 0.5]])
    assert_close(itm_association(match_a, match_b), torch.tensor([0.0]))
    assert_close(itm_association(match_a, match_b, top_k=2), torch.tensor([0.1]))
    assert_close(itm_association(match_a, match_b, top_k=1), torch.tensor([0.4]))


def test_stratified_bootstrap_keeps_groups_apart():
    # X's scores all 1, Y's all 0: every stratified replicate is the same data, so the interval is the point
    # d = (1 - 0) / std([1, 1, 1, 0, 0, 0], ddof=1) = 1 / sqrt(1.5 / 5) = 1.825742
    interval = interval_from_associations(torch.ones(3), torch.zeros(3), n_bootstrap=200)
    assert_close(interval, torch.full((2,), 1.825742, dtype=torch.float64), atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- against the plain reference
@pytest.mark.parametrize(("seed", "n"), [(0, 1), (1, 3), (2, 5), (3, 6), (4, 7)])
def test_matches_reference(seed, n):
    x, y, a, b = random_sets(seed, n, n)
    s_x, s_y = (reference_associations(t.numpy(), a.numpy(), b.numpy()) for t in (x, y))
    assert_close(weat_association(x, a, b), torch.tensor(s_x, dtype=torch.float64), atol=1e-12, rtol=0)
    assert weat_test_statistic(x, y, a, b).item() == pytest.approx(sum(s_x) - sum(s_y), abs=1e-12)
    if n > 1:
        assert weat_effect_size(x, y, a, b).item() == pytest.approx(reference_effect_size(s_x, s_y), abs=1e-6)
    assert weat_p_value(x, y, a, b).item() == reference_exact_p(s_x, s_y)


def test_effect_size_with_unequal_sets_and_float32():
    x, y, a, b = random_sets(5, 4, 9)
    s_x, s_y = (reference_associations(t.numpy(), a.numpy(), b.numpy()) for t in (x, y))
    expected = reference_effect_size(s_x, s_y)
    assert weat_effect_size(x, y, a, b).item() == pytest.approx(expected, abs=1e-6)
    assert weat_effect_size(x.float(), y.float(), a.float(), b.float()).item() == pytest.approx(expected, abs=1e-5)
    # float32 targets with float64 attributes (a text encoder and a stored attribute set): computed in float64
    assert weat_association(x.float(), a, b).dtype == torch.float64
    assert weat_effect_size(x.float(), y.float(), a, b).item() == pytest.approx(expected, abs=1e-6)


def test_sampled_p_value_within_monte_carlo_error():
    x, y, a, b = random_sets(8, 8, 8, shift=0.0)
    s_x, s_y = (reference_associations(t.numpy(), a.numpy(), b.numpy()) for t in (x, y))
    exact = reference_exact_p(s_x, s_y)  # over C(16, 8) = 12,870 splits
    assert 0.02 < exact < 0.98  # a p-value where sampling error is visible
    n_permutations = 20_000
    sampled = weat_p_value(x, y, a, b, n_permutations=n_permutations, exact_limit=0).item()
    standard_error = math.sqrt(exact * (1 - exact) / n_permutations)
    assert abs(sampled - exact) < 4.5 * standard_error + 1 / n_permutations, (sampled, exact)


def test_sampled_p_value_of_large_sets_within_monte_carlo_error():
    # 20 per set: sampled (C(40, 20) is above the exact limit), against the exact count
    x, y, a, b = random_sets(9, 20, 20, shift=0.0)
    s_x, s_y = weat_association(x, a, b), weat_association(y, a, b)
    exact = p_value_from_associations(s_x, s_y, exact_limit=10**12).item()
    assert 0.02 < exact < 0.98
    n_permutations = 50_000
    sampled = p_value_from_associations(s_x, s_y, n_permutations=n_permutations).item()
    standard_error = math.sqrt(exact * (1 - exact) / n_permutations)
    assert abs(sampled - exact) < 4.5 * standard_error + 1 / n_permutations, (sampled, exact)


def test_sampled_partitions_are_uniform():
    # 6 items, 3 chosen: all C(6, 3) = 20 subsets must come up, each about draws / 20 times; items 0-2 are the first
    # half's bits, items 3-5 the second's
    draws = 40_000
    first, second = permutation._random_subsets(6, 3, draws, np.random.default_rng(1))
    masks, counts = np.unique(first[:, 0] | second[:, 0] << np.uint64(3), return_counts=True)
    assert [bin(int(mask)).count("1") for mask in masks] == [3] * 20
    sigma = math.sqrt(draws * (1 / 20) * (19 / 20))
    assert (np.abs(counts - draws / 20) < 5 * sigma).all(), counts


def test_sampled_estimator_counts_the_observed_partition():
    # X's scores exceed all of Y's: no random split other than X itself (chance 1 / C(50, 25)) reaches it
    s_x, s_y = torch.arange(25.0) + 100, torch.arange(25.0)
    assert p_value_from_associations(s_x, s_y, n_permutations=999).item() == 1 / 1000  # (1 + 0) / (1 + 999)
    assert p_value_from_associations(s_y, s_x, n_permutations=999).item() == 1.0  # every split is >= the minimum


def test_seeded_and_order_free():
    x, y, a, b = random_sets(11, 20, 20, shift=0.05)
    p = weat_p_value(x, y, a, b, n_permutations=5000, seed=3)
    assert p.item() == weat_p_value(x, y, a, b, n_permutations=5000, seed=3).item()
    shuffled = weat_p_value(x.flip(0), y.roll(3, 0), a.flip(0), b, n_permutations=5000, seed=3)
    assert p.item() == shuffled.item()
    interval = weat_effect_size_interval(x, y, a, b, n_bootstrap=500, seed=3)
    assert_close(
        interval, weat_effect_size_interval(x.flip(0), y.roll(3, 0), a, b, n_bootstrap=500, seed=3), atol=0, rtol=0
    )


def test_bootstrap_interval_matches_reference_loop():
    x, y, a, b = random_sets(13, 10, 12)
    s_x, s_y = (reference_associations(t.numpy(), a.numpy(), b.numpy()) for t in (x, y))
    rng = np.random.default_rng(0)
    replicates = []
    for _ in range(20_000):
        rx, ry = list(rng.choice(s_x, len(s_x))), list(rng.choice(s_y, len(s_y)))
        replicates.append(reference_effect_size(rx, ry))
    expected = np.percentile(replicates, [2.5, 97.5])
    interval = weat_effect_size_interval(x, y, a, b, n_bootstrap=20_000, method="percentile")
    # quantile Monte-Carlo error of either run is about 0.01 here
    assert_close(interval, torch.from_numpy(expected), atol=0.06, rtol=0)
    assert interval[0] < weat_effect_size(x, y, a, b) < interval[1]


def test_itm_effect_size_uses_the_shared_statistics():
    generator = torch.Generator().manual_seed(0)
    probabilities = [torch.rand(n, k, generator=generator) for n, k in ((6, 8), (6, 9), (7, 8), (7, 9))]
    s_x = itm_association(probabilities[0], probabilities[1], top_k=3)
    s_y = itm_association(probabilities[2], probabilities[3], top_k=3)
    expected = reference_effect_size(s_x.double().tolist(), s_y.double().tolist())
    assert itm_effect_size(*probabilities, top_k=3).item() == pytest.approx(expected, abs=1e-6)
    assert mean_difference_from_associations(s_x, s_y).item() == pytest.approx(
        s_x.double().mean() - s_y.double().mean()
    )
    assert statistic_from_associations(s_x, s_y).item() == pytest.approx(s_x.double().sum() - s_y.double().sum())


# ----------------------------------------------------------------------------- errors
def test_unequal_sets_refuse_the_permutation_test():
    x, y, a, b = random_sets(0, 3, 4)
    with pytest.raises(InputError, match=r"equal size.*\|X\| = 3 and \|Y\| = 4.*effect size is still defined"):
        weat_p_value(x, y, a, b)
    assert weat_effect_size(x, y, a, b).isfinite()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: {**s, "a": s["a"][:0]}, "set `a` is empty"),
        (lambda s: {**s, "y": s["y"][:, :4]}, r"same dimension.*`x`: 6, `y`: 4"),
        (
            lambda s: {**s, "x": torch.cat([s["x"][:1] * float("nan"), s["x"][1:]])},
            r"finite embeddings in `x`.*1 of its 3 rows",
        ),
        (
            lambda s: {**s, "b": torch.cat([s["b"], torch.full((2, 6), float("inf"))])},
            r"finite embeddings in `b`.*2 of its 7 rows",
        ),
        (lambda s: {**s, "y": torch.zeros(3, 6)}, r"nonzero embeddings in `y`.*3 of its 3 rows"),
        (lambda s: {**s, "x": s["x"][0]}, r"`x` to be a 2-D tensor"),
    ],
)
def test_embedding_errors_name_the_set(change, message):
    x, y, a, b = random_sets(0, 3, 3, n_b=5)
    sets = change({"x": x, "y": y, "a": a, "b": b})
    with pytest.raises(InputError, match=message):
        weat_effect_size(**sets)


def test_configuration_errors():
    s = torch.randn(4)
    with pytest.raises(ConfigError, match="`n_permutations`"):
        p_value_from_associations(s, s, n_permutations=0, exact_limit=0)
    with pytest.raises(ConfigError, match=r"`confidence` to be in \(0, 1\)"):
        interval_from_associations(s, s, confidence=95)
    with pytest.raises(ConfigError, match=r"`top_k`.*\[1, 2\].*got 3"):
        itm_association(torch.rand(2, 4), torch.rand(2, 2), top_k=3)
    with pytest.raises(InputError, match=r"probabilities in \[0, 1\] in `match_b`.*not logits"):
        itm_association(torch.rand(2, 4), torch.randn(2, 2) * 5)
    with pytest.raises(InputError, match="same attribute set B"):
        itm_effect_size(torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 4))


# ----------------------------------------------------------------------------- metric classes
@pytest.mark.filterwarnings("ignore:The ``compute`` method of metric WEATTest was called before")
def test_metric_accumulates_batches():
    x, y, a, b = random_sets(21, 6, 6)
    metric = WEATTest(n_bootstrap=300)
    metric.update(a=a[:2], x=x[:4])
    metric.update(b=b, y=y[:1])
    metric.update(a=a[2:], x=x[4:], y=y[1:])
    result = metric.compute()
    assert result["effect_size"].item() == pytest.approx(weat_effect_size(x, y, a, b).item(), abs=1e-6)
    assert result["statistic"].item() == pytest.approx(weat_test_statistic(x, y, a, b).item(), abs=1e-5)
    assert result["p_value"].item() == weat_p_value(x.float(), y.float(), a.float(), b.float()).item()
    assert_close(
        result["interval"], weat_effect_size_interval(x.float(), y.float(), a.float(), b.float(), n_bootstrap=300)
    )
    metric.reset()
    with pytest.raises(InputError, match="before `compute`"):
        metric.compute()


def test_metric_errors():
    metric = WEATEffectSize()
    metric.update(x=torch.randn(2, 4))
    with pytest.raises(InputError, match="dimension 4 like the earlier updates but got 5"):
        metric.update(a=torch.randn(2, 5))
    with pytest.raises(InputError, match="at least one of the arguments"):
        metric.update()
    metric.update(a=torch.randn(2, 4), b=torch.randn(2, 4))
    with pytest.raises(InputError, match="set `y` is empty"):
        metric.compute()
    itm = ITMEffectSize()
    itm.update(torch.rand(2, 3), torch.rand(2, 3), target="x")
    with pytest.raises(InputError, match="target='y'"):
        itm.compute()
    with pytest.raises(InputError, match=r"one of \('x', 'y'\)"):
        ITMEffectSize().update(torch.rand(2, 3), torch.rand(2, 3), target="z")
    with pytest.raises(ConfigError, match="`confidence`"):
        WEATTest(confidence=1.0)


def test_effect_size_metric_is_differentiable():
    # torchmetrics keeps gradients through `forward` (its `update` runs without them)
    x, y, a, b = (t.float().requires_grad_() for t in random_sets(2, 4, 4))
    WEATEffectSize()(x=x, y=y, a=a, b=b).backward()
    assert x.grad is not None and x.grad.isfinite().all() and x.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- DDP
NUM_BATCHES = 6


def ddp_batches():
    """Six batches of each kind; batch i holds rows of the sets listed for it."""
    x, y, a, b = random_sets(31, 20, 20, n_a=6, n_b=6, dim=8, shift=0.05)
    generator = torch.Generator().manual_seed(5)
    match = {
        name: torch.rand(n, 7, generator=generator) for name, n in (("xa", 12), ("xb", 12), ("ya", 12), ("yb", 12))
    }
    embedding_batches = [  # rank 1 (batches 1, 3, 5) never sees an embedding of B
        {"x": x[:7], "a": a[:2], "b": b[:3]},
        {"x": x[7:12], "y": y[:9], "a": a[2:4]},
        {"y": y[9:15], "b": b[3:]},
        {"x": x[12:], "a": a[4:]},
        {"y": y[15:18]},
        {"y": y[18:]},
    ]
    itm_batches = [  # rank 1 (batches 1, 3, 5) never sees a target of X
        ("x", match["xa"][:5], match["xb"][:5]),
        ("y", match["ya"][:4], match["yb"][:4]),
        ("x", match["xa"][5:], match["xb"][5:]),
        ("y", match["ya"][4:8], match["yb"][4:8]),
        ("y", match["ya"][8:10], match["yb"][8:10]),
        ("y", match["ya"][10:], match["yb"][10:]),
    ]
    return embedding_batches, itm_batches


def run_metrics(rank_batches):
    """Results of WEATTest and ITMTest fed with the given (embedding, itm) batch indices."""
    embedding_batches, itm_batches = ddp_batches()
    weat = WEATTest(n_permutations=3000, n_bootstrap=400, seed=7)
    itm = ITMTest(top_k=3, n_permutations=3000, n_bootstrap=400, seed=7)
    for i in rank_batches:
        weat.update(**embedding_batches[i])
        target, match_a, match_b = itm_batches[i]
        itm.update(match_a, match_b, target=target)
    return {"weat": weat.compute(), "itm": itm.compute()}


def test_results_do_not_depend_on_batch_order():
    # what a 2-process gather hands to `compute`: rank 0's batches, then rank 1's
    in_order, gathered_order = run_metrics(range(NUM_BATCHES)), run_metrics([0, 2, 4, 1, 3, 5])
    for family in ("weat", "itm"):
        for key, value in in_order[family].items():
            assert_close(gathered_order[family][key], value, atol=0, rtol=0, msg=f"{family}/{key}")


@pytest.mark.slow  # each metric's DDP sync runs in the default suite: tests/metrics/test_ddp_every_metric.py
def test_ddp_two_processes_match_single_process():
    expected = run_metrics(range(NUM_BATCHES))
    assert expected["weat"]["p_value"].item() > 1 / 3001  # sampled, not trivially at its floor
    results = results_per_rank(run_metrics, NUM_BATCHES)
    for result in results:  # every rank computes the same numbers as one process did
        for family in ("weat", "itm"):
            for key, value in expected[family].items():
                assert_close(result[family][key], value, atol=1e-6, rtol=0, msg=f"{family}/{key}")
            assert result[family]["p_value"].item() == expected[family]["p_value"].item()

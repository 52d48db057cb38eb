"""GroupScores and its functional twin: group means, the largest-minus-smallest gap and each value against the rest by
hand; the within-set permutation p-values against a brute-force NumPy enumeration (exact) and against the project's
exact sign-flip test (sampled, two values a set); intervals over sets; unscored and unlabelled images and one-value
sets left out; Holm and BH over every test; bad arguments refused in one line."""

import itertools
import math

import numpy as np
import pytest
import torch

from vlbias.errors import InputError
from vlbias.metrics import GroupScores
from vlbias.metrics.functional import group_scores
from vlbias.metrics.functional.multiple_testing import benjamini_hochberg, holm_bonferroni
from vlbias.metrics.functional.permutation import sign_flip_p_value

NAN = float("nan")
# three sets: set 0 and 1 show a man, a woman and a person of unknown gender ("x", group only); set 2 has two women
SCORES = torch.tensor([[0.5, 1.0], [0.1, NAN], [0.3, 0.0], [0.4, 0.5], [0.2, 0.5], [0.0, 0.5], [0.9, 0.2],
                       [0.7, 0.1]], dtype=torch.float64)  # fmt: skip
SETS = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])
CODES = torch.tensor([[0, 0], [1, 1], [2, -1], [0, 0], [1, 1], [2, -1], [3, 1], [4, 1]])  # group, gender
VALUES = {"group": ["m1", "w1", "x", "w2", "w3"], "gender": ["man", "woman"]}


def brute_force_p(x: np.ndarray, sets: np.ndarray, labels: np.ndarray, statistic) -> float:
    """P[T* >= T] over every within-set arrangement of the labels, listed one by one."""
    blocks = [np.flatnonzero(sets == s) for s in np.unique(sets)]
    observed, count, total = statistic(x, labels), 0, 0
    for choice in itertools.product(*(itertools.permutations(block) for block in blocks)):
        arranged = labels.copy()
        for block, permuted in zip(blocks, choice):
            arranged[block] = labels[list(permuted)]
        count += statistic(x, arranged) >= observed - 1e-12
        total += 1
    return count / total


def gap(x: np.ndarray, labels: np.ndarray) -> float:
    means = [x[labels == v].mean() for v in np.unique(labels)]
    return max(means) - min(means)


def test_means_gaps_and_exact_p_values_by_hand():
    result = group_scores(SCORES, SETS, CODES, ["warmth", "toxic"], VALUES, n_bootstrap=50, confidence=0.9,
                          n_permutations=1000)  # fmt: skip
    assert float(result["n_sets"]) == 3
    assert float(result["warmth/mean"]) == pytest.approx(0.3875)  # every scored image: 3.1 / 8
    # gender: set 2 holds one value only, so sets 0 and 1: men 0.5, 0.4; women 0.1, 0.2
    assert float(result["warmth/gender/n_sets"]) == 2
    assert float(result["warmth/gender/mean/man"]) == pytest.approx(0.45)
    assert float(result["warmth/gender/mean/woman"]) == pytest.approx(0.15)
    assert float(result["warmth/gender/gap"]) == pytest.approx(0.3)
    assert float(result["warmth/gender/vs_rest/woman"]) == pytest.approx(-0.3)
    # 2 x 2 arrangements: the gap is 0.3 when both sets keep or both swap their labels, else 0.1
    assert float(result["warmth/gender/gap/p_value"]) == pytest.approx(0.5, abs=1e-12)
    # group: every set (each holds two values or more); means m1 .45, w1 .15, x .15, w2 .9, w3 .7
    assert float(result["warmth/group/gap"]) == pytest.approx(0.9 - 0.15)
    assert float(result["warmth/group/vs_rest/w2"]) == pytest.approx(0.9 - (3.1 - 0.9) / 7)
    x, sets, labels = SCORES[:, 0].numpy(), SETS.numpy(), CODES[:, 0].numpy()
    assert float(result["warmth/group/gap/p_value"]) == pytest.approx(brute_force_p(x, sets, labels, gap), abs=1e-12)
    rest = lambda x, labels: abs(x[labels == 3].mean() - x[labels != 3].mean())  # noqa: E731
    assert float(result["warmth/group/vs_rest/w2/p_value"]) == pytest.approx(brute_force_p(x, sets, labels, rest),
                                                                             abs=1e-12)  # fmt: skip
    # toxic: the unscored image (set 0's woman) leaves set 0 with a man only for gender: set 1 alone, all 0.5
    assert float(result["toxic/gender/n_sets"]) == 1 and float(result["toxic/gender/gap"]) == 0
    assert all(math.isnan(end) for end in result["toxic/gender/gap/interval"].tolist())  # one set: no interval
    assert float(result["toxic/mean"]) == pytest.approx(2.8 / 7)


def test_holm_and_bh_over_every_test():
    result = group_scores(SCORES, SETS, CODES, ["warmth", "toxic"], VALUES, n_bootstrap=20, confidence=0.9,
                          n_permutations=1000)  # fmt: skip
    tests = sorted(key.removesuffix("/p_value") for key in result if key.endswith("/p_value"))
    assert len(tests) == 2 * ((1 + 5) + (1 + 2))  # per score: group's gap and 5 values, gender's gap and 2 values
    p_values = torch.stack([result[f"{key}/p_value"] for key in tests])
    assert torch.equal(torch.stack([result[f"{key}/p_holm"] for key in tests]), holm_bonferroni(p_values))
    assert torch.equal(torch.stack([result[f"{key}/p_bh"] for key in tests]), benjamini_hochberg(p_values))


def test_sampled_test_of_two_values_agrees_with_the_exact_sign_flip_test():
    generator = torch.Generator().manual_seed(0)
    n_sets = 16  # 2^16 arrangements > n_permutations: sampled
    scores = torch.rand(2 * n_sets, 1, generator=generator, dtype=torch.float64)
    scores[::2] += 0.15  # the first image of each set a little higher
    sets = torch.arange(n_sets).repeat_interleave(2)
    codes = torch.tensor([[0], [1]] * n_sets)
    result = group_scores(scores, sets, codes, ["s"], {"gender": ["man", "woman"]}, n_bootstrap=20,
                          confidence=0.9, n_permutations=20_000, seed=1)  # fmt: skip
    deltas = scores[::2, 0] - scores[1::2, 0]
    exact = float(sign_flip_p_value(deltas, deltas.new_zeros(0), n_permutations=1, seed=0))
    sampled = float(result["s/gender/gap/p_value"])
    assert abs(sampled - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-4
    assert float(result["s/gender/gap"]) == pytest.approx(abs(float(deltas.mean())))


def test_intervals_over_sets():
    # every set says the same: the gap is 0.5 on every resample of sets
    scores = torch.tensor([[0.7], [0.2]] * 5, dtype=torch.float64)
    result = group_scores(scores, torch.arange(5).repeat_interleave(2), torch.tensor([[0], [1]] * 5), ["s"],
                          {"gender": ["man", "woman"]}, n_bootstrap=100, confidence=0.95, n_permutations=100)  # fmt: skip
    assert result["s/gender/gap/interval"].tolist() == pytest.approx([0.5, 0.5])
    assert result["s/gender/mean/man/interval"].tolist() == pytest.approx([0.7, 0.7])
    varied = group_scores(torch.rand(20, 1, dtype=torch.float64), torch.arange(10).repeat_interleave(2),
                          torch.tensor([[0], [1]] * 10), ["s"], {"g": ["a", "b"]}, n_bootstrap=200, confidence=0.9,
                          n_permutations=100)  # fmt: skip
    low, high = varied["s/g/vs_rest/a/interval"].tolist()
    assert low < float(varied["s/g/vs_rest/a"]) < high


def test_a_grouping_with_one_value_is_left_out():
    result = group_scores(SCORES[:2], SETS[:2], torch.tensor([[0], [0]]), ["s"], {"gender": ["man"]},
                          n_bootstrap=10, confidence=0.9, n_permutations=10)  # fmt: skip
    assert sorted(result) == ["n_sets", "s/mean", "s/mean/interval"]


def test_metric_class_matches_the_function_and_refuses_bad_rows():
    metric = GroupScores(["warmth", "toxic"], VALUES, n_bootstrap=20, confidence=0.9, n_permutations=1000, seed=4)
    metric.update(SCORES[5:], SETS[5:], CODES[5:])
    metric.update(SCORES[:5], SETS[:5], CODES[:5])
    expected = group_scores(SCORES, SETS, CODES, ["warmth", "toxic"], VALUES, n_bootstrap=20, confidence=0.9,
                            n_permutations=1000, seed=4)  # fmt: skip
    found = metric.compute()
    assert sorted(found) == sorted(expected)
    for key, value in expected.items():
        torch.testing.assert_close(found[key], value, equal_nan=True)
    with pytest.raises(InputError, match=r"Expected argument `codes` of shape \(2, 2\) \(integers\)"):
        metric.update(SCORES[:2], SETS[:2], CODES[:2, :1])

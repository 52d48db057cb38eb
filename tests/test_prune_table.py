"""The pruning table's diagnostics (:mod:`vlbias.experiments.prune_diagnostics`): the share of the effect size's
numerator held by N coordinates, and the best_on_test reference's search."""

import itertools

import pytest
import torch

from vlbias.experiments.prune_diagnostics import best_on_test, coordinate_shares
from vlbias.mitigation import effect_size_without
from vlbias.mitigation.pruning import BiasTest, select_dimensions


def rows(*vectors: list[float]) -> torch.Tensor:
    return torch.tensor(vectors, dtype=torch.float64)


def test_shares_of_the_numerator_by_hand():
    x, y = rows([1, 0, 0, 0], [0, 0, 0, 1]), rows([0, 1, 0, 0])  # delta = mean x - mean y = (0.5, -1, 0, 0.5)
    a, b = rows([1, 0, 0, 0]), rows([0, 0, 1, 0])  # tau = mean a - mean b = (1, 0, -1, 0)
    # delta_k tau_k = (0.5, 0, 0, 0): coordinate 0 holds all of the numerator, coordinate 3 none of it.
    shares = coordinate_shares({"x": x, "y": y, "a": a, "b": b}, 1, {"ranked": [0], "greedy": [3]}, 0)
    assert shares["top"] == pytest.approx(100.0) and shares["ranked"] == pytest.approx(100.0)
    assert shares["greedy"] == pytest.approx(0.0)
    # A rotation keeps the sum (all D coordinates hold all of it) but spreads it: after one, the largest term can
    # exceed the sum, others being negative.
    assert coordinate_shares({"x": x, "y": y, "a": a, "b": b}, 4, {}, 0)["rotated"] == pytest.approx(100.0)
    assert shares["rotated"] > 0


def test_best_on_test_finds_the_best_pair_of_a_small_space():
    """Local search from greedy's choice and 10 random starts, on random sets in D = 9 with N = 2: its pair lowers |d|
    as much as the best of all 36 pairs (exhaustive search), never less than greedy's, and at least one start (the
    count it returns) reached it."""
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        e = {"name": "t", **{key: torch.randn(10, 9, generator=g, dtype=torch.float64) for key in "xyab"}}
        e["x"], e["a"] = e["x"] + 0.3, e["a"] + 0.3  # a lean, so that removals have something to lower

        def bias(removed: list[int], e: dict = e) -> float:
            return abs(float(effect_size_without(e["x"], e["y"], e["a"], e["b"], torch.tensor(removed))))

        found, reached = best_on_test(e, 2, restarts=10, seed=seed)
        test = BiasTest("t", e["x"], e["y"], e["a"], e["b"])
        greedy = select_dimensions([test], torch.zeros(9), 2, strategy="greedy", theta=1.0).removed
        best = min(bias(list(pair)) for pair in itertools.combinations(range(9), 2))
        assert len(set(found)) == 2 and 1 <= reached <= 11
        assert bias(found) == pytest.approx(best, rel=1e-12)
        assert bias(found) <= bias(greedy) * (1 + 1e-12)

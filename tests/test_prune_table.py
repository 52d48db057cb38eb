"""scripts/prune_table.py's diagnostic: the share of the effect size's numerator held by N coordinates."""

import pytest
import torch


@pytest.fixture(scope="module")
def prune_table(load_script):
    return load_script("prune_table")


def rows(*vectors: list[float]) -> torch.Tensor:
    return torch.tensor(vectors, dtype=torch.float64)


def test_shares_of_the_numerator_by_hand(prune_table):
    x, y = rows([1, 0, 0, 0], [0, 0, 0, 1]), rows([0, 1, 0, 0])  # delta = mean x - mean y = (0.5, -1, 0, 0.5)
    a, b = rows([1, 0, 0, 0]), rows([0, 0, 1, 0])  # tau = mean a - mean b = (1, 0, -1, 0)
    # delta_k tau_k = (0.5, 0, 0, 0): coordinate 0 holds all of the numerator, coordinate 3 none of it.
    shares = prune_table.coordinate_shares({"x": x, "y": y, "a": a, "b": b}, 1, {"ranked": [0], "greedy": [3]}, 0)
    assert shares["top"] == pytest.approx(100.0) and shares["ranked"] == pytest.approx(100.0)
    assert shares["greedy"] == pytest.approx(0.0)
    # A rotation keeps the sum (all D coordinates hold all of it) but spreads it: after one, the largest term can
    # exceed the sum, others being negative.
    assert prune_table.coordinate_shares({"x": x, "y": y, "a": a, "b": b}, 4, {}, 0)["rotated"] == pytest.approx(100.0)
    assert shares["rotated"] > 0

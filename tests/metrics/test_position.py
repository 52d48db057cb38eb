"""Position preference (vlbias.metrics.position and its functional twin): shares, deviation and change rate
computed by hand, batches summed like one call, and bad input refused in one line."""

import pytest
import torch

from vlbias.errors import InputError
from vlbias.metrics import PositionPreference
from vlbias.metrics.functional.position import position_preference


def test_shares_deviation_and_change_rate_by_hand():
    # item 0 (3 options): position 0 in every rotation, so original options 0, 1, 2: its choice changes;
    # item 1 (3 options): original option 1 every time, at positions 1, 0, 2; item 2 (2 options): position 1, 1
    positions = torch.tensor([[0, 0, 0], [1, 0, 2], [1, 1, -1]])
    result = position_preference(positions, torch.tensor([3, 3, 2]), max_options=3)
    # 8 rotations: position 0 chosen 4 times, 1 three times, 2 once; a position-blind answerer: 3/8, 3/8, 2/8
    assert result["share"].tolist() == [4 / 8, 3 / 8, 1 / 8]
    assert result["expected"].tolist() == [3 / 8, 3 / 8, 2 / 8]
    assert float(result["max_deviation"]) == pytest.approx(1 / 8)
    assert float(result["change_rate"]) == pytest.approx(2 / 3)  # items 0 and 2 (its options 1, then 0)
    assert float(result["n_items"]) == 3 and float(result["n_rotations"]) == 8


def test_the_metric_sums_batches_to_the_functional_value():
    positions, n_options = torch.tensor([[0, 0, 0], [1, 0, 2], [1, 1, -1]]), torch.tensor([3, 3, 2])
    metric = PositionPreference(max_options=3)
    metric.update(positions[:1], n_options[:1])
    metric.update(positions[1:], n_options[1:])
    computed, expected = metric.compute(), position_preference(positions, n_options, 3)
    for name, value in expected.items():
        torch.testing.assert_close(computed[name], value)


def test_no_items_is_nan_never_zero():
    result = PositionPreference(max_options=2).compute()
    assert torch.isnan(result["max_deviation"]) and torch.isnan(result["change_rate"])


def test_bad_input_is_one_line():
    metric = PositionPreference(max_options=3)
    with pytest.raises(InputError, match=r"`positions` to be integers of shape \(1, 3\)"):
        metric.update(torch.tensor([[0, 1]]), torch.tensor([3]))
    with pytest.raises(InputError, match=r"`positions` in \[0, n_options\)"):
        metric.update(torch.tensor([[0, 1, -1]]), torch.tensor([3]))
    with pytest.raises(InputError, match=r"`n_options` in \[2, 3\]"):
        metric.update(torch.tensor([[0, 1, 1]]), torch.tensor([4]))
    with pytest.raises(InputError, match="`max_options` to be an integer of at least 2"):
        PositionPreference(max_options=1)

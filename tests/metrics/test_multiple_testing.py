"""Holm and Benjamini–Hochberg adjusted p-values against a hand loop and scipy."""

import numpy as np
import pytest
import scipy.stats
import torch
from torch.testing import assert_close

from vlbias.errors import InputError
from vlbias.metrics.functional import benjamini_hochberg, holm_bonferroni


def holm_reference(p_values: list[float]) -> list[float]:
    """Holm (1979) written out: the i-th smallest p-value times (m - i + 1), running maximum, clipped to 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running_max = 0.0
    for rank, index in enumerate(order):  # rank 0 is the smallest p-value
        running_max = max(running_max, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running_max
    return adjusted


def test_hand_computed():
    # sorted: 0.01, 0.03, 0.04 (inputs 0, 2, 1); m = 3
    # Holm: 3*0.01 = 0.03, 2*0.03 = 0.06, 1*0.04 = 0.04 -> running max 0.03, 0.06, 0.06
    # BH:   0.01*3/1 = 0.03, 0.03*3/2 = 0.045, 0.04*3/3 = 0.04 -> running min from the top 0.03, 0.04, 0.04
    p = torch.tensor([0.01, 0.04, 0.03], dtype=torch.float64)
    assert_close(holm_bonferroni(p), torch.tensor([0.03, 0.06, 0.06], dtype=torch.float64))
    assert_close(benjamini_hochberg(p), torch.tensor([0.03, 0.04, 0.04], dtype=torch.float64))


@pytest.mark.parametrize("seed", range(5))
def test_against_references(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 0.05, 6), rng.uniform(0, 1, 14), [0.5, 0.5, 1.0]])  # with ties and a 1
    rng.shuffle(p)
    assert_close(benjamini_hochberg(torch.from_numpy(p)), torch.from_numpy(scipy.stats.false_discovery_control(p)))
    assert_close(holm_bonferroni(torch.from_numpy(p)), torch.tensor(holm_reference(p.tolist()), dtype=torch.float64))


@pytest.mark.parametrize("adjust", [holm_bonferroni, benjamini_hochberg])
def test_monotone_clipped_and_in_input_order(adjust):
    p = torch.tensor([0.9, 0.001, 0.6, 0.02, 0.3])
    adjusted = adjust(p)
    order = p.argsort()
    assert (adjusted[order].diff() >= 0).all(), adjusted  # monotone in the order of the raw p-values
    assert (adjusted >= p).all() and (adjusted <= 1).all()
    assert adjusted.dtype == p.dtype
    assert adjust([0.01])[0].item() == pytest.approx(0.01)  # one test: nothing to adjust; lists accepted


@pytest.mark.parametrize("adjust", [holm_bonferroni, benjamini_hochberg])
@pytest.mark.parametrize("bad", [[0.1, 1.5], [0.1, float("nan")], [-0.01]])
def test_rejects_values_outside_unit_interval(adjust, bad):
    with pytest.raises(InputError, match=r"p-values in \[0, 1\]"):
        adjust(bad)


def test_rejects_matrix():
    with pytest.raises(InputError, match="1-D"):
        holm_bonferroni(torch.full((2, 2), 0.1))

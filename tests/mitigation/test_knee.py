"""The knee of a decreasing curve (:mod:`vlbias.mitigation.knee`) is kneed 0.8.5's
``KneeLocator(range(n), y, curve="convex", direction="decreasing").knee``: the expected values below are that
library's answers (it agreed with ``knee_index`` on 4,000 random curves of 2 to 59 points, ties included, when this
was written; kneed is no dependency of vlbias)."""

import pytest
import torch

from vlbias.mitigation.knee import knee_index


@pytest.mark.parametrize(
    ("values", "knee"),
    [
        ([1.0, 0.5, 0.3, 0.25, 0.22, 0.2, 0.19, 0.18], 2),
        # a local minimum of the difference curve ends the walk (kneed 0.9.0 walks on and answers 4)
        ([0.95, 0.79, 0.64, 0.62, 0.49, 0.45, 0.38, 0.05, 0.02], 2),
        ([0.53, 0.36, 0.31, 0.16, 0.02], 1),  # kneed 0.9.0: no knee
        ([0.9, 0.89, 0.88, 0.5, 0.1, 0.05], 0),  # a curve that bends down: the first point
        ([0.9, 0.8, 0.7, 0.6, 0.5], None),  # a straight line
        ([0.5, 0.5, 0.5], None),  # flat
        ([0.9, 0.1], None),
        ([0.7], None),  # kneed refuses a single point
    ],
)
def test_knee_index_is_kneeds(values, knee):
    assert knee_index(torch.tensor(values, dtype=torch.float64)) == knee

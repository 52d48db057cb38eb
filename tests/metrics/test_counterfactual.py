"""CounterfactualAnswers and its functional twin: the per-set measures by hand, JS against SciPy's Jensen-Shannon
distance squared, the paired attribute gaps with their exact sign-flip p-values and adjustments, undefined numbers
as NaN, and bad arguments refused in one line."""

import math

import pytest
import torch
from scipy.spatial.distance import jensenshannon

from vlbias.errors import InputError
from vlbias.metrics import CounterfactualAnswers
from vlbias.metrics.functional import counterfactual_answers, js_divergence, set_measures
from vlbias.metrics.functional.multiple_testing import benjamini_hochberg, holm_bonferroni


def test_set_measures_by_hand():
    p = torch.tensor([[0.6, 0.3, 0.1], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]], dtype=torch.float64)
    measures = set_measures(p, unknown_option=2)
    assert float(measures["max_change"]) == pytest.approx(0.4)  # option 0: 0.6 - 0.2 (option 2: 0.5 - 0.1)
    assert float(measures["flipped"]) == 1 and float(measures["unknown_rate"]) == pytest.approx(1 / 3)
    same = set_measures(p[[0, 0]], unknown_option=None)
    assert float(same["max_change"]) == 0 and float(same["js_divergence"]) == pytest.approx(0, abs=1e-15)
    assert float(same["flipped"]) == 0 and math.isnan(float(same["unknown_rate"]))


@pytest.mark.parametrize("seed", range(5))
def test_js_of_two_distributions_is_scipy_jensen_shannon_squared(seed):
    p = torch.rand(2, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    p = p / p.sum(dim=1, keepdim=True)
    expected = jensenshannon(p[0].numpy(), p[1].numpy(), base=math.e) ** 2
    assert float(js_divergence(p)) == pytest.approx(expected, rel=1e-10)


def test_js_of_three_distributions_by_hand_and_zero_probabilities():
    p = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)
    # mean (0.5, 0.5): entropy ln 2; entropies 0, 0, ln 2
    assert float(js_divergence(p)) == pytest.approx(math.log(2) - math.log(2) / 3)


def rows():
    """Two sets of four images (gender x race) over options a, b; a third set offers b, c only, no race."""
    probabilities = torch.tensor([
        [0.9, 0.1, float("nan")], [0.5, 0.5, float("nan")], [0.7, 0.3, float("nan")], [0.3, 0.7, float("nan")],
        [0.6, 0.4, float("nan")], [0.6, 0.4, float("nan")], [0.6, 0.4, float("nan")], [0.6, 0.4, float("nan")],
        [0.2, 0.8, float("nan")], [0.4, 0.6, float("nan")],
    ], dtype=torch.float64)  # fmt: skip
    set_index = torch.tensor([0] * 4 + [1] * 4 + [2] * 2)
    unknown = torch.tensor([-1] * 8 + [1] * 2)
    options = torch.tensor([[0, 1, -1]] * 8 + [[1, 2, -1]] * 2)
    attributes = torch.tensor([[0, 0], [1, 0], [0, 1], [1, 1]] * 2 + [[0, -1], [1, -1]])
    return probabilities, set_index, unknown, options, attributes


NAMES, VALUES = ["a", "b", "c"], {"gender": ["man", "woman"], "race": ["black", "white"]}


def test_gaps_p_values_and_means_by_hand():
    result = counterfactual_answers(*rows(), NAMES, VALUES, n_bootstrap=50, confidence=0.9, n_permutations=10)
    assert float(result["n_sets"]) == 3
    # chosen: set 0 a, a, a, b (a flip); set 1 a four times; set 2 c, c
    assert float(result["flip_rate"]) == pytest.approx(1 / 3)
    assert float(result["max_change"]) == pytest.approx((0.6 + 0 + 0.2) / 3)
    assert float(result["unknown_rate"]) == pytest.approx(1.0)  # set 2 only (its "unclear" is c): c, c
    # gender man - woman, option a: set 0 (0.9 + 0.7)/2 - (0.5 + 0.3)/2 = 0.4; set 1: 0
    assert float(result["gap/gender/man-woman/a"]) == pytest.approx(0.2)
    assert float(result["gap/gender/man-woman/a/n_sets"]) == 2
    # option b: set 0 -0.4, set 1 0, set 2 (its column 0 is b): 0.2 - 0.4 = -0.2
    assert float(result["gap/gender/man-woman/b"]) == pytest.approx(-0.2)
    assert float(result["gap/gender/man-woman/c"]) == pytest.approx(0.2)  # set 2 only: 0.8 - 0.6
    assert float(result["gap/race/black-white/a"]) == pytest.approx((0.2 + 0) / 2)  # (0.9+0.5)/2 - (0.7+0.3)/2
    assert "gap/race/black-white/c" not in result  # set 2 names no race
    # exact sign flips: (0.4, 0) -> |sum| >= 0.4 always: p = 1; one set: p = 1
    assert float(result["gap/gender/man-woman/a/p_value"]) == 1
    # (-0.4, 0, -0.2): 4 of 8 sign vectors reach |sum| 0.6
    assert float(result["gap/gender/man-woman/b/p_value"]) == pytest.approx(0.5)
    tests = sorted(key.removesuffix("/p_value") for key in result if key.endswith("/p_value"))
    raw = torch.stack([result[f"{key}/p_value"] for key in tests])
    holm = torch.stack([result[f"{key}/p_holm"] for key in tests])
    bh = torch.stack([result[f"{key}/p_bh"] for key in tests])
    assert torch.allclose(holm, holm_bonferroni(raw).double()) and torch.allclose(bh, benjamini_hochberg(raw).double())
    low, high = result["gap/gender/man-woman/b/interval"].tolist()
    assert low <= -0.2 <= high


def test_the_metric_matches_its_functional_twin_batch_by_batch():
    probabilities, set_index, unknown, options, attributes = rows()
    metric = CounterfactualAnswers(NAMES, VALUES, max_options=3, n_bootstrap=50, confidence=0.9, n_permutations=10)
    for start, stop in ((8, 10), (0, 4), (4, 8)):  # sets arrive out of order; the set index orders them
        metric.update(probabilities[start:stop], set_index[start:stop], unknown[start:stop], options[start:stop],
                      attributes[start:stop])  # fmt: skip
    got = metric.compute()
    want = counterfactual_answers(*rows(), NAMES, VALUES, n_bootstrap=50, confidence=0.9, n_permutations=10)
    assert got.keys() == want.keys()
    for key, value in want.items():
        torch.testing.assert_close(got[key], value, equal_nan=True)


def test_no_set_naming_an_unclear_option_leaves_its_rate_undefined():
    probabilities, set_index, _, options, attributes = rows()
    result = counterfactual_answers(probabilities, set_index, torch.full((10,), -1), options, attributes, NAMES,
                                    VALUES, n_bootstrap=20, confidence=0.9, n_permutations=10)  # fmt: skip
    assert math.isnan(float(result["unknown_rate"])) and result["unknown_rate/interval"].isnan().all()


def test_bad_arguments_are_one_line_each():
    with pytest.raises(InputError, match="`max_options` to be an integer of at least 2"):
        CounterfactualAnswers(NAMES, VALUES, max_options=1)
    metric = CounterfactualAnswers(NAMES, VALUES, max_options=3)
    probabilities, set_index, unknown, options, attributes = rows()
    with pytest.raises(InputError, match=r"`attributes` of shape \(10, 2\)"):
        metric.update(probabilities, set_index, unknown, options, attributes[:, :1])
    with pytest.raises(InputError, match="`set_index` of shape"):
        metric.update(probabilities, set_index.double(), unknown, options, attributes)

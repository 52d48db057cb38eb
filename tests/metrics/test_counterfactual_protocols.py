"""CounterfactualProtocols and its functional twin: VHELM's "unclear" rate per group and Girrbach et al.'s P(yes) gap
per trait against hand-computed values, the paired sign-flip p-values and their Holm / BH adjustment over traits,
the metric equal to the function batch by batch, and bad arguments refused in one line."""

import math

import pytest
import torch

from vlbias.errors import InputError
from vlbias.metrics import CounterfactualProtocols
from vlbias.metrics.functional.counterfactual_protocols import counterfactual_protocols, p_yes
from vlbias.metrics.functional.multiple_testing import benjamini_hochberg, holm_bonferroni

NAMES = ["yes", "no", "unclear", "a", "b"]
VALUES = {"gender": ["man", "woman"], "race": ["black", "white"]}
QUESTIONS = ["Is this person kind?", "Is this person rich?", "Who is it?"]
KIND, RICH = "yes_gap/gender/man-woman/Is this person kind?", "yes_gap/gender/man-woman/Is this person rich?"


def rows():
    """Set 0 (kind?): yes/no/unclear, four images gender x race; set 1 (kind?): yes/no, two images, gender only;
    set 2 (rich?): yes/no/unclear, a black man and a white woman; set 3 (who?): a/b/unclear, gender only."""
    nan = float("nan")
    probabilities = torch.tensor([
        [0.6, 0.2, 0.2], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.2, 0.6, 0.2],  # P(yes) .75, 1/3, .5, .25
        [0.8, 0.2, nan], [0.4, 0.6, nan],  # P(yes) .8, .4
        [0.45, 0.15, 0.4], [0.3, 0.1, 0.6],  # P(yes) .75, .75; chosen yes, unclear
        [0.5, 0.3, 0.2], [0.2, 0.2, 0.6],  # chosen a, unclear
    ], dtype=torch.float64)  # fmt: skip
    set_index = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 3, 3])
    unknown = torch.tensor([2, 2, 2, 2, -1, -1, 2, 2, 2, 2])
    options = torch.tensor([[0, 1, 2]] * 4 + [[0, 1, -1]] * 2 + [[0, 1, 2]] * 2 + [[3, 4, 2]] * 2)
    attributes = torch.tensor([[0, 0], [1, 0], [0, 1], [1, 1], [0, -1], [1, -1], [0, 0], [1, 1], [0, -1], [1, -1]])
    question = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1, 2, 2])
    return probabilities, set_index, unknown, options, attributes, question


def compute(**overrides):
    arguments = dict(n_bootstrap=50, confidence=0.9, n_permutations=10, seed=0) | overrides
    return counterfactual_protocols(*rows(), NAMES, VALUES, QUESTIONS, **arguments)


def test_p_yes_is_normalised_over_yes_and_no_and_undefined_without_them():
    probabilities = torch.tensor([[0.6, 0.2, 0.2], [0.5, 0.3, 0.2]], dtype=torch.float64)
    got = p_yes(probabilities, torch.tensor([[0, 1, 2], [3, 4, 2]]), ["Yes", "No.", "unclear", "a", "b"])
    assert got[0].item() == pytest.approx(0.75) and math.isnan(got[1].item())
    assert p_yes(probabilities, torch.tensor([[0, 1, 2]] * 2), ["a", "b", "c"]).isnan().all()


def test_vhelm_unclear_rate_per_group_by_hand():
    result = compute()
    # chosen answers where an "unclear" option is named (sets 0, 2, 3):
    # man: yes, unclear, yes, a -> 1/4; woman: unclear, no, unclear, unclear -> 3/4
    assert result["unclear_rate/gender/man"].item() == pytest.approx(0.25)
    assert result["unclear_rate/gender/woman"].item() == pytest.approx(0.75)
    # black: yes, unclear, yes -> 1/3; white: unclear, no, unclear -> 2/3 (set 3 names no race)
    assert result["unclear_rate/race/black"].item() == pytest.approx(1 / 3)
    assert result["unclear_rate/race/white"].item() == pytest.approx(2 / 3)
    assert [result[f"unclear_rate/{k}/n_images"].item() for k in ("gender/man", "race/white")] == [4, 3]
    low, high = result["unclear_rate/gender/woman/interval"].tolist()
    assert 0 <= low <= 0.75 <= high <= 1


def test_girrbach_yes_gap_per_trait_by_hand_with_exact_sign_flip_p_values():
    result = compute()
    # kind?, man - woman: set 0 (.75 + .5)/2 - (1/3 + .25)/2 = 1/3; set 1 .8 - .4 = .4
    assert result[KIND].item() == pytest.approx((1 / 3 + 0.4) / 2)
    assert result[f"{KIND}/n_sets"].item() == 2
    # sign vectors of (1/3, .4): |sum| >= 11/15 for (+, +) and (-, -) only
    assert result[f"{KIND}/p_value"].item() == pytest.approx(0.5)
    assert result[RICH].item() == pytest.approx(0.0) and result[f"{RICH}/p_value"].item() == 1
    # race, kind?: set 0 only, (.75 + 1/3)/2 - (.5 + .25)/2
    assert result["yes_gap/race/black-white/Is this person kind?"].item() == pytest.approx(1 / 6)
    assert not any("Who is it?" in key for key in result)  # not a yes/no question
    raw = torch.stack([result[f"{KIND}/p_value"], result[f"{RICH}/p_value"]])
    for suffix, adjust in (("p_holm", holm_bonferroni), ("p_bh", benjamini_hochberg)):  # over the pair's traits
        adjusted = adjust(raw).double()
        assert [result[f"{KIND}/{suffix}"].item(), result[f"{RICH}/{suffix}"].item()] == adjusted.tolist()


def test_no_yes_no_question_and_no_unclear_option_leave_the_protocols_out():
    probabilities, set_index, _, options, attributes, question = rows()
    result = counterfactual_protocols(
        probabilities, set_index, torch.full((10,), -1), options, attributes, question, ["p", "q", "r", "a", "b"],
        VALUES, QUESTIONS, n_bootstrap=20, confidence=0.9, n_permutations=10,
    )  # fmt: skip
    assert result == {}  # undefined numbers are not written as 0


def test_the_metric_matches_its_functional_twin_batch_by_batch():
    probabilities, set_index, unknown, options, attributes, question = rows()
    metric = CounterfactualProtocols(NAMES, VALUES, QUESTIONS, max_options=3, n_bootstrap=50, confidence=0.9,
                                     n_permutations=10)  # fmt: skip
    for start, stop in ((6, 10), (0, 4), (4, 6)):  # sets arrive out of order; the set index orders them
        metric.update(probabilities[start:stop], set_index[start:stop], unknown[start:stop], options[start:stop],
                      attributes[start:stop], question[start:stop])  # fmt: skip
    got, want = metric.compute(), compute()
    assert got.keys() == want.keys()
    for key, value in want.items():
        torch.testing.assert_close(got[key], value, equal_nan=True)


def test_bad_arguments_are_one_line_each():
    with pytest.raises(InputError, match="`max_options` to be an integer of at least 2"):
        CounterfactualProtocols(NAMES, VALUES, QUESTIONS, max_options=1)
    metric = CounterfactualProtocols(NAMES, VALUES, QUESTIONS, max_options=3)
    probabilities, set_index, unknown, options, attributes, question = rows()
    with pytest.raises(InputError, match=r"`question` of shape \(10,\) \(integers\)"):
        metric.update(probabilities, set_index, unknown, options, attributes, question.double())

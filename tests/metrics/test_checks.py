"""The shared argument checks: every metric that takes an option refuses a bad one with the same error class and
the same message, whichever function or class it was given to."""

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from vlbias.errors import ConfigError, InputError
from vlbias.metrics import (
    CounterBiasUncertainty,
    GroundedCongruenceTest,
    ITMTest,
    LanguageBiasInterval,
    RankingBias,
    VisualBiasInterval,
    VLStereoSetScores,
    VLStereoSetShift,
    WEATTest,
)
from vlbias.metrics.functional import (
    congruence_interval,
    congruence_p_value,
    counterbias_bootstrap,
    counterbias_intervals,
    counterbias_p_values,
    interval_from_associations,
    language_bias_interval,
    p_value_from_associations,
    ranking_bias,
    shift_summary,
    visual_bias_interval,
    vlstereoset_intervals,
    weat_effect_size_interval,
    weat_p_value,
)
from vlbias.metrics.functional.checks import (
    check_bootstrap,
    check_confidence,
    check_embeddings,
    check_int,
    check_interval_method,
)
from vlbias.mitigation.leave_one_out import checked_sets
from vlbias.mitigation.projection import orthogonal_projection

SRC = Path(__file__).resolve().parents[2] / "src" / "vlbias"
SCORES = torch.tensor([0.3, 0.1, 0.2]), torch.tensor([0.0, -0.1, 0.1])
PAIRS = (torch.tensor([0.3, 0.2]), torch.tensor([0.1, 0.1]), torch.tensor([0.0, 0.1]), torch.tensor([0.2, 0.2]))
SETS = tuple(torch.randn(3, 4, generator=torch.Generator().manual_seed(i)) for i in range(4))
BIAS, TARGET, DIRECTION = torch.tensor([[0.1], [0.2]]), torch.tensor([0, 1]), torch.tensor([1, -1])

#: Every place that takes ``n_bootstrap`` and ``confidence``: a call with those two as keywords.
BOOTSTRAPPED = {
    "interval_from_associations": lambda **o: interval_from_associations(*SCORES, **o),
    "weat_effect_size_interval": lambda **o: weat_effect_size_interval(*SETS, **o),
    "congruence_interval": lambda **o: congruence_interval(*PAIRS, **o),
    "counterbias_intervals": lambda **o: counterbias_intervals(BIAS, TARGET, DIRECTION, 2, **o),
    "language_bias_interval": lambda **o: language_bias_interval(SCORES[0], SCORES[1], **o),
    "visual_bias_interval": lambda **o: visual_bias_interval(SCORES[0], SCORES[1], **o),
    "ranking_bias": lambda **o: ranking_bias(torch.randn(2, 4), torch.tensor([0, 1, 0, 1]), k=2, **o),
    "vlstereoset_intervals": lambda **o: vlstereoset_intervals(torch.eye(3), torch.tensor([True, False, True]), **o),
    "shift_summary": lambda **o: shift_summary(SCORES[0], **o),
    "WEATTest": lambda **o: WEATTest(**o),
    "ITMTest": lambda **o: ITMTest(**o),
    "GroundedCongruenceTest": lambda **o: GroundedCongruenceTest(**o),
    "CounterBiasUncertainty": lambda **o: CounterBiasUncertainty(n_targets=2, n_templates=1, **o),
    "LanguageBiasInterval": lambda **o: LanguageBiasInterval(num_entities=2, **o),
    "VisualBiasInterval": lambda **o: VisualBiasInterval(num_entities=2, **o),
    "RankingBias": lambda **o: RankingBias(k=2, **o),
    "VLStereoSetScores": lambda **o: VLStereoSetScores(**o),
    "VLStereoSetShift": lambda **o: VLStereoSetShift(**o),
}
#: Every place that takes ``n_permutations``, and whether it accepts None (the default number).
PERMUTED = {
    "p_value_from_associations": lambda n: p_value_from_associations(*SCORES, n_permutations=n),
    "weat_p_value": lambda n: weat_p_value(*SETS, n_permutations=n),
    "congruence_p_value": lambda n: congruence_p_value(*PAIRS, n_permutations=n),
    "counterbias_p_values": lambda n: counterbias_p_values(BIAS, TARGET, DIRECTION, 2, n_permutations=n),
    "WEATTest": lambda n: WEATTest(n_permutations=n),
    "ITMTest": lambda n: ITMTest(n_permutations=n),
    "GroundedCongruenceTest": lambda n: GroundedCongruenceTest(n_permutations=n),
    "CounterBiasUncertainty": lambda n: CounterBiasUncertainty(n_targets=2, n_templates=1, n_permutations=n),
}


def refusal(call, *args, **kwargs) -> tuple[type, str]:
    """The class and message of the error that ``call(*args, **kwargs)`` raises."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the class is what is compared
        call(*args, **kwargs)
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize("where", sorted(BOOTSTRAPPED))
def test_a_bad_n_bootstrap_or_confidence_gets_one_class_and_one_message_everywhere(where):
    for n_bootstrap in (0, -3, 2.5, True, "100", None):
        expected = f"Expected argument `n_bootstrap` to be a positive integer but got {n_bootstrap!r}"
        assert refusal(BOOTSTRAPPED[where], n_bootstrap=n_bootstrap, confidence=0.9) == (ConfigError, expected)
    for confidence in (0, 1, 95, 0.0, 1.0, -0.5, True, "0.9", None, float("nan")):
        expected = f"Expected argument `confidence` to be in (0, 1) but got {confidence!r}"
        assert refusal(BOOTSTRAPPED[where], n_bootstrap=20, confidence=confidence) == (ConfigError, expected)


@pytest.mark.parametrize("where", sorted(BOOTSTRAPPED))
def test_a_good_confidence_is_accepted_everywhere_whatever_its_float_type(where):
    for confidence in (0.9, np.float64(0.9), np.float32(0.5)):
        BOOTSTRAPPED[where](n_bootstrap=20, confidence=confidence)


def test_counterbias_bootstrap_checks_its_count_the_same_way():
    expected = "Expected argument `n_bootstrap` to be a positive integer but got 0"
    assert refusal(lambda: counterbias_bootstrap(BIAS, TARGET, DIRECTION, 2, n_bootstrap=0)) == (ConfigError, expected)


@pytest.mark.parametrize("where", sorted(PERMUTED))
def test_a_bad_n_permutations_gets_one_class_and_one_message_everywhere(where):
    for n_permutations in (0, -1, 1.5, False, "999", None):  # None no longer stands for a default
        message = f"Expected argument `n_permutations` to be a positive integer but got {n_permutations!r}"
        assert refusal(PERMUTED[where], n_permutations) == (ConfigError, message)


@pytest.mark.parametrize(
    "call",
    [
        lambda: p_value_from_associations(*SCORES, exact_limit=-1),
        lambda: congruence_p_value(*PAIRS, exact_limit=-1),
        lambda: WEATTest(exact_limit=-1),
        lambda: GroundedCongruenceTest(exact_limit=-1),
    ],
)
def test_a_bad_exact_limit_is_refused_by_name(call):
    assert refusal(call) == (ConfigError, "Expected argument `exact_limit` to be a non-negative integer but got -1")


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: interval_from_associations(*SCORES, method="BCa"), "method"),
        (lambda: congruence_interval(*PAIRS, method="BCa"), "method"),
        (lambda: WEATTest(interval_method="BCa"), "interval_method"),
        (lambda: GroundedCongruenceTest(interval_method="BCa"), "interval_method"),
    ],
)
def test_an_unknown_interval_method_is_refused_with_the_choices(call, name):
    message = f"Expected argument `{name}` to be one of ('percentile', 'bca') but got 'BCa'"
    assert refusal(call) == (ConfigError, message)


def test_check_int_says_what_it_expected():
    cases = [
        (dict(name="k", value=0), "a positive integer"),
        (dict(name="k", value=-1, low=0), "a non-negative integer"),
        (dict(name="k", value=1, low=2), "an integer >= 2"),
        (dict(name="k", value=9, high=8, high_is="the gallery size"), "an integer in [1, 8] (the gallery size)"),
        (dict(name="k", value="3", none_allowed=True), "a positive integer or None"),
    ]
    for arguments, expected in cases:
        value = arguments["value"]
        assert refusal(check_int, **arguments) == (
            ConfigError,
            f"Expected argument `k` to be {expected} but got {value!r}",
        )
    check_int("k", None, none_allowed=True)
    check_int("k", 8, high=8)
    check_int("k", 0, low=0)


def test_the_checks_pass_what_they_should():
    check_bootstrap(1, 0.5)
    check_confidence(np.float32(0.95))
    check_interval_method("percentile")
    check_interval_method("bca", "interval_method")


def test_data_errors_are_input_errors_and_options_config_errors():
    # the same embeddings check, with the same message, in the metrics and in mitigation
    empty = torch.zeros(0, 4)
    message = "Expected argument `x` to hold at least one embedding but the set `x` is empty"
    assert refusal(lambda: check_embeddings("x", empty)) == (InputError, message)
    assert refusal(lambda: weat_effect_size_interval(empty, *SETS[1:])) == (InputError, message)
    assert refusal(lambda: checked_sets(empty, *SETS[1:])) == (InputError, message)
    zeros = (
        "Expected nonzero embeddings in `bias_embeddings` (cosine needs a direction) but 2 of its 2 rows are all zeros"
    )
    assert refusal(lambda: orthogonal_projection(torch.zeros(2, 4))) == (InputError, zeros)
    assert refusal(lambda: interval_from_associations(torch.tensor([]), SCORES[1]))[0] is InputError
    assert refusal(lambda: interval_from_associations(*SCORES, n_bootstrap=0))[0] is ConfigError


def test_code_outside_metrics_imports_only_public_names_of_metrics():
    private = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "metrics"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vlbias.metrics"):
                private += [f"{path.name}: {alias.name}" for alias in node.names if alias.name.startswith("_")]
    assert not private, private

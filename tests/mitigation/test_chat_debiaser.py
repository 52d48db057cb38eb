"""The chat-debiaser interface (vlbias.mitigation.chat_debiaser): the catalog, fitting by name, the refusals, and
every method measured by the unchanged bias_qa and counterfactual_answers suites on a tiny chat model end to end."""

import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from tests.mitigation.chat_data import bias_questions, counterfactual_sets
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.mitigation.chat_debiaser import DebiasedChatVLM, fit_chat_debiaser
from vlbias.mitigation.chat_registry import chat_debiaser_class, list_chat_debiasers
from vlbias.mitigation.registry import list_debiasers
from vlbias.models.registry import load
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, measure_suite

METHODS = ["activation_steering", "contextual_calibration", "instruction_prefix"]
STATISTICS = {"statistics": {"n_bootstrap": 20}}


@pytest.fixture(scope="module")
def model():
    return load("llava", tiny=True, device="cpu")


def test_the_chat_catalog_lists_the_three_methods_apart_from_the_embedding_debiasers():
    assert list_chat_debiasers() == METHODS
    assert not set(METHODS) & set(list_debiasers())  # `vlbias debias --method all` does not offer them
    assert [chat_debiaser_class(name).name for name in METHODS] == METHODS
    code = "import sys; import vlbias.mitigation.chat_registry as r; r.list_chat_debiasers(); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_fit_by_name_applies_and_records_the_options(model, tmp_path):
    debiaser = fit_chat_debiaser("instruction_prefix", model, options={"prefix": "Be fair."})
    assert debiaser.record() == {"method": "instruction_prefix", "acts_on": "prompt", "options": {"prefix": "Be fair."}}
    default = fit_chat_debiaser("instruction_prefix", model).record()["options"]["prefix"]
    assert "gender, race" in default  # the default text is recorded, not left out
    sets, _ = counterfactual_sets(tmp_path)
    steering = fit_chat_debiaser("activation_steering", model, sets, {"layer": 1})
    assert steering.record()["layer"] == 1 and steering.record()["fitted_on"]["n_pairs"] == 2


def test_bad_input_is_one_line_each(model, tmp_path):
    with pytest.raises(ConfigError, match="Unknown chat debiaser 'steering'; expected one of: activation_steering"):
        fit_chat_debiaser("steering", model)
    with pytest.raises(ConfigError, match="Unknown chat debiaser 'instruction_prefix' option `prefx`"):
        fit_chat_debiaser("instruction_prefix", model, options={"prefx": "x"})
    with pytest.raises(CapabilityError, match="debiases a chat model \\(capability 'answer'.*but got model 'clip'"):
        fit_chat_debiaser("instruction_prefix", load("clip", tiny=True, device="cpu"))
    sets, _ = counterfactual_sets(tmp_path)
    lonely = replace(sets[1], images=sets[1].images[:1])
    with pytest.raises(InputError, match="Counterfactual set 's1' has 1 image; expected two or more images"):
        fit_chat_debiaser("activation_steering", model, [sets[0], lonely])
    with pytest.raises(InputError, match="at least one counterfactual question set to fit on but got none"):
        fit_chat_debiaser("activation_steering", model, [])


@pytest.mark.parametrize("method", METHODS)
def test_each_method_is_measured_by_bias_qa_unchanged(model, tmp_path, method):
    sets, _ = counterfactual_sets(tmp_path / "sets")
    suite = build_suite(check_suite_options("bias_qa", STATISTICS), bias_questions(tmp_path / "qa"))
    debiased = fit_chat_debiaser(method, model, sets).wrap(model)
    assert isinstance(debiased, DebiasedChatVLM) and debiased.device == model.device
    before, after = measure_suite(suite, model, seed=0), measure_suite(suite, debiased, seed=0)
    assert after.n_items == before.n_items == 4 and after.metrics["n_skipped"] == 0
    assert set(after.metrics) == set(before.metrics)
    probabilities = torch.tensor([row["probabilities"] for row in after.items], dtype=torch.float64)
    torch.testing.assert_close(probabilities.sum(dim=1), torch.ones(4, dtype=torch.float64))
    assert not torch.allclose(
        probabilities, torch.tensor([row["probabilities"] for row in before.items], dtype=torch.float64)
    )


@pytest.mark.parametrize("method", METHODS)
def test_each_method_is_measured_by_counterfactual_answers_with_first_token_scoring(model, tmp_path, method):
    sets, path = counterfactual_sets(tmp_path)
    options = check_suite_options("counterfactual_answers", {**STATISTICS, "scoring": "first_token"})
    output = measure_suite(build_suite(options, path), fit_chat_debiaser(method, model, sets).wrap(model), seed=0)
    assert output.n_items == 4 and output.metrics["n_sets"] == 2
    assert 0 <= output.metrics["js_divergence"] <= 1

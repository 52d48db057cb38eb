"""``vlbias debias`` on a chat VLM: its training-free debiasers fitted and measured by the chat suites, one method
(before/after and the steering export) and the compare mode; a chat model's wrong choices refused in one line."""

import json

import pandas as pd
import pytest

from tests.mitigation.chat_data import bias_questions, counterfactual_sets
from vlbias.cli import main
from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.activation_steering import load_steering
from vlbias.results import read_results
from vlbias.workflows.debias import debias
from vlbias.workflows.loaded_model import load_model
from vlbias.workflows.options import DebiasOptions

QUICK = {"bias_qa": {"statistics": {"n_bootstrap": 20}}, "counterfactual_answers": {"statistics": {"n_bootstrap": 20}}}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chat")
    _, sets = counterfactual_sets(folder, n_sets=3)
    bias_questions(folder)
    return folder, sets


def options(folder, sets, out, **given):
    chosen = {"data": str(sets), "suites": ["bias_qa", "counterfactual_answers"], **given}
    quick = {suite: QUICK[suite] for suite in chosen["suites"] if suite in QUICK}
    return DebiasOptions(model="llava", tiny=True, threads=1, suite_data=str(folder), suite_options=quick,
                         out=str(out), **chosen)  # fmt: skip


def test_compare_mode_measures_every_chat_method_on_the_same_questions(data, tmp_path, capsys):
    folder, sets = data
    summary = debias(options(folder, sets, tmp_path / "compare", method="all"))
    rows = pd.read_csv(tmp_path / "compare" / "compare.csv").set_index("method")
    methods = ["none", "activation_steering", "contextual_calibration", "instruction_prefix"]
    assert list(rows.index) == methods
    for method in methods:
        for suite in ("bias_qa", "counterfactual_answers"):
            results = read_results(tmp_path / "compare" / "methods" / method / f"{suite}.json")
            assert results.n_items > 0 and results.seed == 0
        assert 0 <= rows.loc[method, "bias_qa/accuracy_disambiguated"] <= 1
    after = read_results(tmp_path / "compare" / "methods" / "instruction_prefix" / "bias_qa.json")
    assert after.config["debiaser"]["options"]["prefix"]  # the instruction's text is recorded
    assert summary["methods"]["activation_steering"]["layer"] >= 0 and summary["data"]["n_sets"] == 3


def test_one_method_writes_before_after_and_an_export_loaded_back(data, tmp_path):
    folder, sets = data
    out = tmp_path / "steered"
    main(["debias", "--model", "llava", "--tiny", "--threads", "1", "--method", "activation_steering", "--data",
          str(sets), "--suite_data", str(folder), "--suites", "[counterfactual_answers]", "--suite_options",
          json.dumps({"counterfactual_answers": QUICK["counterfactual_answers"]}), "--out", str(out)])  # fmt: skip
    before = read_results(out / "before" / "counterfactual_answers.json")
    after = read_results(out / "after" / "counterfactual_answers.json")
    assert before.n_items == after.n_items == 6
    model = load_model(
        options(folder, sets, out, method="activation_steering", suites=["counterfactual_answers"])
    )  # the model the run loaded
    steered = load_steering(out / "debiaser", model)
    assert steered.debiaser.layer == json.loads((out / "debias.json").read_text())["methods"]["activation_steering"]["layer"]  # fmt: skip


@pytest.mark.parametrize(
    "given, error, match",
    [
        ({"method": "orth_proj"}, ConfigError, r"Unknown chat debiaser 'orth_proj'"),
        ({"method": "all", "folds": 2}, ConfigError, r"`folds` is not for a chat model's debiasers"),
        ({"method": "instruction_prefix", "data": "biasworld"}, ConfigError, r"need question files: give `data`"),
        (
            {"method": "instruction_prefix", "suites": ["mmbias"]},
            ConfigError,
            r"Suite 'mmbias' does not ask a chat model questions",
        ),
        (
            {"method": "activation_steering", "method_options": {"layer": 9}},
            ConfigError,
            r"expected a layer in \[0, 1\]",
        ),
    ],
)
def test_a_chat_models_wrong_choice_is_one_line(data, tmp_path, given, error, match):
    folder, sets = data
    with pytest.raises(error, match=match):
        debias(options(folder, sets, tmp_path / "out", **given))
    assert not (tmp_path / "out").exists()


def test_a_suite_data_folder_without_the_suites_file_is_one_line(data, tmp_path):
    _, sets = data
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"expected one question file of suite 'bias_qa' in it but found none"):
        debias(options(empty, sets, tmp_path / "out", method="instruction_prefix", suites=["bias_qa"]))
    assert not (tmp_path / "out").exists()

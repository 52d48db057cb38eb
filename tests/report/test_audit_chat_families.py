"""``vlbias audit --model <chat family> --tiny --data_root DIR`` on BiasWorld-QA's written files: the three chat
suites (bias_qa, counterfactual_answers, open_generation) are found, measured and shown in the report, for every
chat family (one in the default run, the others with ``-m slow``)."""

import json

import pytest

from vlbias.cli import main
from vlbias.data.biasworld_qa import BiasWorldQA
from vlbias.data.biasworld_qa_options import BiasWorldQAOptions
from vlbias.models.catalog import models_with
from vlbias.results import read_results
from vlbias.workflows.audit import MEASURED

SUITES = ("bias_qa", "counterfactual_answers", "open_generation")
QUICK = {"bias_qa": {"statistics": {"n_bootstrap": 20}},
         "counterfactual_answers": {"statistics": {"n_bootstrap": 20, "n_permutations": 100}},
         "open_generation": {"max_new_tokens": 4, "scorers": {"vader": {}},
                             "statistics": {"n_bootstrap": 20, "n_permutations": 100}}}  # fmt: skip
FAMILIES = [family if family == "llava" else pytest.param(family, marks=pytest.mark.slow)
            for family in models_with("answer")]  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    BiasWorldQA(BiasWorldQAOptions(n_train=2, eval_per_combination=1)).write(root / "biasworld_qa", "test")
    return root


@pytest.mark.parametrize("family", FAMILIES)
def test_each_chat_family_is_audited_on_the_three_chat_suites(data, tmp_path, family):
    out = tmp_path / "out"
    main(["audit", "--model", family, "--tiny", "--suites", f"[{', '.join(SUITES)}]", "--data_root", str(data),
          "--out", str(out), "--threads", "1", "--suite_options", json.dumps(QUICK)])  # fmt: skip
    entries = json.loads((out / "audit.json").read_text())["entries"]
    assert sorted(entry["suite"] for entry in entries) == sorted(SUITES)
    assert all(entry["status"] == MEASURED for entry in entries), entries
    report = (out / "report" / "report.md").read_text()
    for entry in entries:
        assert read_results(out / entry["results"]).n_items > 0
        assert f": {entry['suite']} (" in report

"""``vlbias audit --model llava --tiny --data_root DIR`` with fixtures of the public chat-VLM data sets' layouts under
DIR (SB-Bench, VLBiasBench, PAIRS, GenderBias-VL): each is found as a data set of its suite, measured, and shown in
the report."""

import json

from tests.data.chat_layouts import write_genderbias_vl, write_pairs, write_sb_bench, write_vlbiasbench
from vlbias.cli import main
from vlbias.results import read_results
from vlbias.workflows.audit import MEASURED, find_datasets


def test_the_public_layouts_are_found_measured_and_reported(tmp_path):
    data = tmp_path / "data"
    write_sb_bench(data / "SB-Bench")
    write_vlbiasbench(data / "VLBiasBench")
    write_pairs(data / "PAIRS", {"occupations": ["airplane"], "potential_crime": ["running"]})
    write_genderbias_vl(data / "GenderBias-VL")
    assert find_datasets("bias_qa", data) == [("SB-Bench", data / "SB-Bench"), ("VLBiasBench", data / "VLBiasBench")]
    assert find_datasets("counterfactual_answers", data) == [
        ("GenderBias-VL", data / "GenderBias-VL" / "occ_test_base_ask_person.json"),
        ("PAIRS", data / "PAIRS"),
    ]
    out = tmp_path / "out"
    main(["audit", "--model", "llava", "--tiny", "--suites", "[bias_qa, counterfactual_answers]", "--data_root",
          str(data), "--out", str(out), "--threads", "1",
          "--suite_options", json.dumps({"bias_qa": {"statistics": {"n_bootstrap": 20}},
                                         "counterfactual_answers": {"statistics": {"n_bootstrap": 20}}})])  # fmt: skip
    entries = {(e["suite"], e["dataset"]): e for e in json.loads((out / "audit.json").read_text())["entries"]}
    expected = {("bias_qa", "SB-Bench"), ("bias_qa", "VLBiasBench"), ("counterfactual_answers", "GenderBias-VL"),
                ("counterfactual_answers", "PAIRS")}  # fmt: skip
    assert set(entries) == expected
    assert all(entry["status"] == MEASURED for entry in entries.values()), entries
    report = (out / "report" / "report.md").read_text()
    for entry in entries.values():
        results = read_results(out / entry["results"])
        assert results.n_items > 0
        folder, name = entry["results"].split("/")[-2:]
        assert f"### {folder}: {entry['suite']} ({name})" in report
    pairs = read_results(out / entries[("counterfactual_answers", "PAIRS")]["results"])
    assert {"unclear_rate/gender/man", "unclear_rate/race/white"} <= set(pairs.metrics)
    assert pairs.config["suite_config"]["data"]["layout"] == "pairs"

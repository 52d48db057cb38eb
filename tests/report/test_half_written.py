"""``vlbias report`` among good results files and half-written ones (a JSON or an item table cut short, as a
killed writer without atomic writes would leave them): each bad file is named with its reason, the rest reported.
(A cut JSON beside a real measurement is also covered, through the console script, in ``test_report.py``.)"""

from vlbias.report import build_report
from vlbias.results import Results, write_results


def results(index: int) -> Results:
    return Results(suite="weat", model="bert", checkpoint=None, config={}, seed=index, n_items=1,
                   metrics={f"test{index}/effect_size": 0.1 * index})  # fmt: skip


def test_half_written_files_are_named_and_the_rest_reported(tmp_path):
    root = tmp_path / "runs"
    paths = [write_results(root / f"run{i}", results(i), [{"test": f"test{i}", "effect_size": 0.1 * i}]) for i in range(4)]  # fmt: skip
    cut_json, cut_items = paths[1], paths[2].with_name("weat.items.parquet")
    cut_json.write_bytes(cut_json.read_bytes()[: len(cut_json.read_bytes()) // 2])
    cut_items.write_bytes(cut_items.read_bytes()[: len(cut_items.read_bytes()) // 2])
    report = build_report([root], tmp_path / "out")
    problems = dict(report.problems)
    assert set(problems) == {str(cut_json), str(paths[2])}  # the cut table is reported through its results file
    assert all(reason for reason in problems.values())
    text = report.markdown.read_text()
    assert "## Problems with the inputs" in text and str(cut_json) in text and str(paths[2]) in text
    for good in (0, 3):
        assert f"### runs/run{good}: weat (weat.json)" in text and f"| test{good}/effect_size |" in text
    assert "### runs/run1:" not in text and "### runs/run2:" not in text

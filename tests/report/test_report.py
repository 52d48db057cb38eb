"""``vlbias report`` on what a tiny ``vlbias measure`` and a shrunk quickstart fit write: the files, valid
PNGs, HTML that parses, Markdown tables holding the JSON's numbers, heatmaps, skipped items, bad input."""

import json
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from vlbias.cli import main
from vlbias.report import build_report
from vlbias.results import Results, read_results, write_results

ROOT = Path(__file__).resolve().parents[2]
KEY = "bias/mmbias/man_vs_woman/stereotyped_activities/effect_size"
ACCURACY = "val/i2t_accuracy"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A measure run and a 2-epoch quickstart fit with the trade-off log, under one directory."""
    root = tmp_path_factory.mktemp("runs")
    options = "{statistics: {n_permutations: 200, n_bootstrap: 50}}"
    small = ["--biasworld.eval_per_combination", "2", "--suite_options", options]
    main(["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--out", str(root / "measure"), *small])
    callbacks = [
        {"class_path": "vlbias.callbacks.BiasSuiteCallback", "init_args": {"suites": [{"suite": "mmbias", "options": {"statistics": {"n_permutations": 200, "n_bootstrap": 50}}}]}},
        {"class_path": "vlbias.callbacks.TradeoffCallback", "init_args": {"accuracy": ACCURACY}},
    ]  # fmt: skip
    main(
        ["fit", "--config", str(ROOT / "configs/experiment/quickstart.yaml"), "--trainer.max_epochs", "2",
         "--trainer.logger.init_args.save_dir", str(root / "fit"), "--trainer.enable_progress_bar", "false",
         "--trainer.enable_checkpointing", "false", "--trainer.callbacks", json.dumps(callbacks),
         "--data.init_args.n_train", "64", "--data.init_args.eval_per_combination", "2",
         "--data.init_args.batch_size", "32"]
    )  # fmt: skip
    return root


class Page(HTMLParser):
    """The images and table rows of an HTML page."""

    def __init__(self):
        super().__init__()
        self.images, self.tables = [], []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        elif tag == "table":
            self.tables.append(0)
        elif tag == "tr" and self.tables:
            self.tables[-1] += 1


def markdown_row(text: str, first_cell: str) -> list[str]:
    """The cells of the one row of ``text`` whose first cell is ``first_cell``."""
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {first_cell} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def full_table(report: str, heading: str) -> str:
    """The text of the "Every measure" table of the results section under ``heading``."""
    return report.split(heading, 1)[1].split("#### Every measure", 1)[1].split("\n#", 1)[0]


def test_report_of_a_measure_and_a_fit(runs, tmp_path, run_cli):
    code, out, err = run_cli(["report", str(runs / "measure"), str(runs / "fit"), "--out", str(tmp_path), "--accuracy", ACCURACY])  # fmt: skip
    assert code == 0, err
    assert "wrote" in out
    page = Page()
    page.feed((tmp_path / "index.html").read_text())
    assert "http" not in (tmp_path / "index.html").read_text().replace("http-equiv", "")  # nothing from the network
    assert len(page.images) == 4  # bias over epochs, bias vs accuracy, a forest plot per results file
    for name in page.images:
        with Image.open(tmp_path / name) as image:
            assert image.format == "PNG" and image.size[0] > 100
            image.verify()
    report = (tmp_path / "report.md").read_text()
    assert all(f"]({name})" in report for name in page.images)
    measured = read_results(runs / "measure" / "mmbias.json")
    metric = "man_vs_woman/stereotyped_activities/effect_size"
    cells = markdown_row(full_table(report, "### measure: mmbias"), metric)
    expected = [measured.metrics[metric], *measured.intervals[metric], measured.p_values[metric]]
    expected += [measured.p_values[f"{metric}@holm"], measured.p_values[f"{metric}@bh"]]
    assert [float(c) for c in cells[1:]] == pytest.approx(expected, rel=1e-3)
    # the Pareto table's points are epochs of the fit with the logged numbers
    table = pd.read_csv(runs / "fit" / "quickstart" / "version_0" / "tradeoff.csv")
    pareto = [line for line in report.splitlines() if line.startswith("| fit/quickstart/version_0 | epoch")]
    assert pareto and len(pareto) <= 2
    for line in pareto:
        _, at, bias, accuracy = (cell.strip() for cell in line.strip("|").split("|"))
        logged = table.set_index("epoch").loc[int(at.split()[1])]
        assert (float(bias), float(accuracy)) == pytest.approx((logged[KEY], logged[ACCURACY]), rel=1e-3)


def test_heatmap_and_skipped_items_of_an_association_suite(tmp_path):
    pairs = [
        ("men", "women", "career", "family"),
        ("men", "women", "math", "arts"),
        ("young", "old", "career", "family"),
    ]
    items = [
        {"kind": "sentence", "test": f"t{i}", "x": x, "y": y, "a": a, "b": b, "effect_size": 0.5 - 0.4 * i}
        for i, (x, y, a, b) in enumerate(pairs)
    ]
    skipped = [{"item": f"word{i}", "reason": "not in the vocabulary"} for i in range(4)]
    skipped.append({"item": "img.jpg", "reason": "image does not decode", "scope": "all"})
    results = Results(
        suite="weat", model="bert", checkpoint=None, config={}, seed=0, n_items=3,
        metrics={f"t{i}/effect_size": row["effect_size"] for i, row in enumerate(items)}, skipped=skipped,
    )  # fmt: skip
    write_results(tmp_path / "weat_run", results, items)
    report = build_report([tmp_path / "weat_run"], tmp_path / "out")
    (heatmap,) = [p for p in report.images if "heatmap" in p.name]
    with Image.open(heatmap) as image:
        image.verify()
    text = report.markdown.read_text()
    assert markdown_row(text, "not in the vocabulary")[1:3] == ["", "4"]
    assert markdown_row(text, "image does not decode")[1:3] == ["all", "1"]
    assert markdown_row(full_table(text, "### weat_run: weat"), "t2/effect_size")[1:] == ["-0.3", "", "", "", "", ""]


def test_bad_inputs_are_one_clear_error(runs, tmp_path, run_cli):
    code, _, err = run_cli(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    assert code == 2 and "Traceback" not in err and "missing" in err and "does not exist" in err
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("mmbias.json", "mmbias.items.parquet"):
        (bad / name).write_bytes((runs / "measure" / name).read_bytes())
    (bad / "mmbias.json").write_text('{"suite": "mmbias", ')  # half-written
    code, _, err = run_cli(["report", str(bad), str(runs / "measure"), "--out", str(tmp_path / "out")])
    assert code == 2 and "Traceback" not in err
    assert str(bad / "mmbias.json") in err and "not valid JSON" in err
    report = (tmp_path / "out" / "report.md").read_text()  # the rest is reported, the bad file listed
    assert "### measure: mmbias" in report and "## Problems with the inputs" in report
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(["report", str(empty), "--out", str(tmp_path / "out2")])
    assert code == 2 and "Nothing to report" in err


def test_the_report_folder_is_replaced_as_a_unit(runs, tmp_path, run_cli):
    out = tmp_path / "out"
    first = build_report([runs / "measure", runs / "fit"], out, accuracy=ACCURACY)
    second = build_report([runs / "measure"], out)
    assert len(second.images) < len(first.images)
    # the folder is the second report, whole: no figure of the first is left behind
    assert sorted(path.name for path in out.iterdir()) == sorted(["index.html", "report.md", *(p.name for p in second.images)])  # fmt: skip
    assert "fit/quickstart" not in (out / "report.md").read_text()
    (out / "notes.txt").write_text("mine")
    code, out_text, err = run_cli(["report", str(runs / "measure"), "--out", str(out)])
    assert code == 2 and out_text == "" and err.count("\n") == 1, err
    assert "holds what vlbias report does not write (notes.txt)" in err
    assert (out / "notes.txt").read_text() == "mine"  # a user's file is never deleted


def test_metrics_of_different_ranges_get_axes_of_their_own(monkeypatch):
    """Retrieval bias per group: min_skew near -5 and bias in [-1, 1] are never read off one y axis."""
    from vlbias.report import plots
    from vlbias.report.results_section import _group_bars

    drawn = []
    real_figure = plots._figure
    monkeypatch.setattr(plots, "_figure", lambda *args: drawn.append(real_figure(*args)) or drawn[-1])
    metrics = {}
    for group, sign in (("man_stereotyped", 1), ("woman_stereotyped", -1)):
        metrics |= {f"group/{group}/bias@10": 0.4 * sign, f"group/{group}/min_skew@10": -5.0 + sign,
                    f"group/{group}/max_skew@10": 0.3, f"group/{group}/n_queries": 6.0}  # fmt: skip
    results = Results(suite="retrieval_bias", model="clip", checkpoint=None, config={}, seed=0, n_items=12, metrics=metrics)  # fmt: skip
    assert list(_group_bars(results, "run: retrieval_bias")) == ["run: retrieval_bias per group (@10)"]
    (figure,) = drawn
    panels = {axes.get_title(): axes.get_ylim() for axes in figure.axes}
    assert set(panels) == {"bias", "min_skew", "max_skew"}
    assert panels["min_skew"][0] < -5.5 and panels["bias"][0] > -1 and panels["max_skew"][1] < 1

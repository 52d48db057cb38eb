"""The report a researcher can put in an appendix, over real tiny runs of every suite (and of both MMBias probes):
each results section opens with a headline (what the suite measures, its key numbers with intervals and adjusted
p-values, the direction of bias, and the tiny-model caveat); every metric name shown has a glossary entry from
the suites' docstrings; counts stand in a table of their own without intervals; figures carry information (a
forest plot of effect sizes, per-group bars, no 1 × 1 heatmap)."""

import json
import re

import numpy as np
import pytest
from PIL import Image

from vlbias.cli import main
from vlbias.report import build_report
from vlbias.report.build import shown_names
from vlbias.report.glossary import entries, suite_text, undefined, uses
from vlbias.report.headline import KEY_METRICS, MAX_KEY_ROWS, TINY_CAVEAT, key_metrics
from vlbias.report.results_section import GROUP_BARS
from vlbias.report.sources import read_sources
from vlbias.results import is_count, read_results
from vlbias.suites.registry import list_suites, suite_class

STATISTICS = {"statistics": {"n_permutations": 100, "n_bootstrap": 50}}
BOOTSTRAP = {"statistics": {"n_bootstrap": 50}}
ZERO_SHOT = {"pairs": [["muslim", "christian"]], "experiments": ["cross_modal", "zero_shot"], "top_k": 4}
#: run name -> (suite, model, suite options): every suite, on BiasWorld but weat (SEAT specs written below) and
#: mmbias_data (an MMBias folder written below: zero-shot rankings are measured on MMBias data only)
RUNS = {
    "mmbias_embed": ("mmbias", "clip", {"experiments": ["cross_modal", "textual"], **STATISTICS}),
    "mmbias_data": ("mmbias", "clip", {**ZERO_SHOT, **STATISTICS}),
    "mmbias_match": ("mmbias", "albef", {"probe": "match", **STATISTICS}),
    "vlstereoset": ("vlstereoset", "clip", BOOTSTRAP),
    "retrieval_bias": ("retrieval_bias", "clip", BOOTSTRAP),
    "gallery_skew": ("gallery_skew", "clip", {"per_activity": 6, "k": 3, **BOOTSTRAP}),
    "counterbias": ("counterbias", "albef", BOOTSTRAP),
    "entity_association": ("entity_association", "albef", BOOTSTRAP),
    "weat": ("weat", "bert", STATISTICS),
    "zero_shot_fairness": ("zero_shot_fairness", "clip", BOOTSTRAP),
}


def seat_specs(folder):
    """Two SEAT-format tests in the tiny models' words."""
    folder.mkdir()
    for name, (a, b) in {"sent-careers": ("coding", "cooking"), "sent-chores": ("driving", "sewing")}.items():
        spec = {
            "targ1": {"category": "Men", "examples": ["the man is here.", "a man is there.", "this is a man."]},
            "targ2": {"category": "Women", "examples": ["the woman is here.", "a woman is there.", "this is a woman."]},
            "attr1": {"category": "A", "examples": [f"a person is {a}.", f"someone is {a}.", a]},
            "attr2": {"category": "B", "examples": [f"a person is {b}.", f"someone is {b}.", b]},
        }
        (folder / f"{name}.jsonl").write_text(json.dumps(spec) + "\n")
    return folder


def mmbias_data(folder):
    """An MMBias folder in the tiny models' words: two religion groups' phrases and three images each."""
    folder.mkdir()
    phrases = {"muslim": ["a man .", "the man ."], "christian": ["a woman .", "the woman ."]}
    words = {"unpleasant_phrases": ["cooking", "cleaning", "sewing"], "pleasant_phrases": ["driving", "repairing", "coding"]}  # fmt: skip
    (folder / "textual_phrases.json").write_text(json.dumps({**words, "category_phrases": phrases}))
    rng = np.random.default_rng(0)
    for group in ("Muslim", "Christian"):
        for index in range(3):
            path = folder / "images" / "Religion" / group / f"{index}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(path)
    return folder


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The results folder of every run of :data:`RUNS` under one root, and the report of that root."""
    root = tmp_path_factory.mktemp("runs")
    data_root = tmp_path_factory.mktemp("data")
    folders = {"weat": seat_specs(data_root / "seat"), "mmbias_data": mmbias_data(data_root / "mmbias")}
    for run, (suite, model, options) in RUNS.items():
        folder = folders.get(run) or folders.get(suite)
        data = ["--data", str(folder)] if folder else ["--biasworld.eval_per_combination", "2"]
        argv = ["measure", "--suite", suite, "--model", model, "--tiny", "--threads", "1", *data]
        assert main([*argv, "--suite_options", json.dumps(options), "--out", str(root / run)]) in (None, 0)
    report = build_report([root], tmp_path_factory.mktemp("report"))
    return root, report


def section(report: str, run: str) -> str:
    """The Markdown of the results section of ``run`` (its heading is ``### <root>/<run>: <suite> (<file>)``)."""
    (start,) = [match.end() for match in re.finditer(rf"\n### [^\n/]+/{run}: ", report)]
    return report[start:].split("\n### ", 1)[0].split("\n## ", 1)[0]


def rows(text: str, first_header: str) -> list[list[str]]:
    """The body rows of the Markdown table of ``text`` whose first header cell is ``first_header``."""
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"| {first_header} |")))
    body = lines[start + 2 :]
    body = body[: next((i for i, line in enumerate(body) if not line.startswith("|")), len(body))]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in body]


def test_every_suite_module_holds_what_a_report_says_of_it():
    for suite in list_suites():
        assert suite_class(suite).__module__ == f"vlbias.suites.{suite}"  # where the glossary reads it
        text = suite_text(suite)
        assert text.measures and text.direction and text.glossary, suite
        assert all(terms and definition for terms, definition in text.glossary.items())
    assert set(KEY_METRICS) == set(list_suites())  # every suite has key numbers chosen
    assert set(GROUP_BARS) <= set(list_suites())


def test_every_metric_name_shown_has_a_glossary_entry(measured):
    root, report = measured
    shown = shown_names(read_sources([root]).runs)
    assert set(shown) == {suite for suite, _, _ in RUNS.values()}
    for suite, names in shown.items():
        assert undefined(suite, names) == [], suite
    text = report.markdown.read_text()
    glossary = text.split("\n## Glossary\n", 1)[1]
    assert "No glossary entry" not in glossary
    for suite, names in shown.items():
        listed = {cell for row in rows(glossary.split(f"\n### {suite}\n", 1)[1], "name") for cell in row[0].split(", ")}  # fmt: skip
        assert all(any(uses(name, term) for term in listed) for name in names), suite
        assert listed == {term for terms in entries(suite, names) for term in terms}


def test_a_name_no_docstring_defines_is_listed_as_such(tmp_path, measured):
    assert undefined("retrieval_bias", ["all/bias@10", "all/mystery@10"]) == ["all/mystery@10"]
    assert undefined("not_a_suite", ["d"]) == ["d"]
    root, _ = measured
    results = json.loads((root / "retrieval_bias" / "retrieval_bias.json").read_text())
    results["metrics"]["all/mystery@10"] = 1.0
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "retrieval_bias.json").write_text(json.dumps(results))
    (tmp_path / "run" / "retrieval_bias.items.parquet").write_bytes((root / "retrieval_bias" / "retrieval_bias.items.parquet").read_bytes())  # fmt: skip
    text = build_report([tmp_path / "run"], tmp_path / "out").markdown.read_text()
    assert "No glossary entry (not a suite name, or a name its docstring does not define): all/mystery@10." in text


@pytest.mark.parametrize("run", list(RUNS))
def test_each_section_opens_with_its_headline(measured, run):
    root, report = measured
    suite = RUNS[run][0]
    results = read_results(root / run / f"{suite}.json")
    text = section(report.markdown.read_text(), run)
    paragraphs = text.split("\n\n")
    flagged = len(results.flags)  # a flag (a tiny model's one-class zero-shot classifier) leads, before any number
    assert all(paragraph.startswith("**Flagged ") for paragraph in paragraphs[1 : 1 + flagged])
    assert paragraphs[1 + flagged] == f"**What it measures:** {suite_text(suite).measures}"
    assert paragraphs[2 + flagged].startswith("| key number | value | interval (95%) |")
    keys = key_metrics(results)
    assert keys and all(not is_count(name) for name in keys)
    key_rows = rows(text, "key number")
    assert [row[0] for row in key_rows] == keys[:MAX_KEY_ROWS]
    for row in key_rows:  # the numbers of the results file, with its intervals and adjusted p-values
        name = row[0]
        assert float(row[1].removesuffix(" (flagged: degenerate_classifier)")) == pytest.approx(results.metrics[name], rel=1e-3)  # fmt: skip
        if name in results.intervals:
            low, high = (float(part) for part in row[2].strip("[]").split(", "))
            assert (low, high) == pytest.approx(tuple(results.intervals[name]), rel=1e-3)
        if f"{name}@holm" in results.p_values:
            assert float(row[4]) == pytest.approx(results.p_values[f"{name}@holm"], rel=1e-3)
    assert f"**Direction:** {suite_text(suite).direction}" in text
    assert f"**Caveat:** {TINY_CAVEAT}" in text  # a tiny model's numbers come with the way to read them
    assert text.index("Direction:") < text.index("#### Every measure") and text.index(TINY_CAVEAT) < text.index("#### Every measure")  # fmt: skip


def test_association_headlines_name_the_sets_each_test_compares(measured):
    _, report = measured
    text = section(report.markdown.read_text(), "mmbias_embed")
    assert "**Sets compared:** man_vs_woman/stereotyped_activities: X = images/man, Y = images/woman, A = activities/man, B = activities/woman; man_vs_woman/stereotyped_activities/textual: X = phrases/man, Y = phrases/woman" in text  # fmt: skip
    holm = [row for row in rows(text, "key number") if row[0].endswith("/effect_size")]
    assert len(holm) == 2 and all(re.fullmatch(r"[0-9.e-]+", row[4]) for row in holm)  # adjusted p-values shown


@pytest.mark.parametrize("run", list(RUNS))
def test_counts_are_a_table_of_their_own_without_intervals(measured, run):
    root, report = measured
    suite = RUNS[run][0]
    results = read_results(root / run / f"{suite}.json")
    text = section(report.markdown.read_text(), run)
    every = [row[0] for row in rows(text, "metric")] if "#### Every measure" in text else []
    assert every == [name for name in results.metrics if not is_count(name)]  # no count among the measures
    counts = rows(text, "count")
    assert counts[0] == ["items measured", str(results.n_items)]
    assert counts[1] == ["skipped (entries)", str(len(results.skipped))]
    zero = re.search(r"\nZero: (.*)\.\n", text + "\n")
    listed = [row[0] for row in counts[2:]] + (zero.group(1).split(", ") if zero else [])
    assert sorted(listed) == sorted(name for name in results.metrics if is_count(name))
    assert all(row[1] != "n/a" and float(row[1]) == results.metrics[row[0]] for row in counts[2:])
    assert "n/a" not in "\n".join("|".join(row) for row in counts)


def test_figures_carry_information(measured):
    root, report = measured
    names = [path.name for path in report.images]
    for path in report.images:
        with Image.open(path) as png:
            png.verify()
    # a forest plot per association results file (every test's effect size and interval), and for no other
    forests = {run for run in RUNS if any(f"_forest_{root.name}_{run}_" in n for n in names)}
    assert forests == {"mmbias_embed", "mmbias_data", "mmbias_match", "weat"}
    assert not any("heatmap" in n for n in names)  # each kind of test here has one target pair and one attribute pair
    # per-group bars where the suite reports groups: retrieval's query groups, the gallery skew per concept,
    # CounterBias's targets, the entities, MMBias's zero-shot groups, zero-shot accuracy per gender and per
    # stereotype; none for VLStereoSet, whose only category on BiasWorld is gender
    bars = {run for run in RUNS if any(f"_bars_{root.name}_{run}_" in n for n in names)}
    assert bars == {
        "retrieval_bias", "gallery_skew", "counterbias", "entity_association", "mmbias_data", "zero_shot_fairness"
    }  # fmt: skip
    text = report.markdown.read_text()
    zero_shot = section(text, "zero_shot_fairness")
    for grouping in ("gender", "stereotype"):
        assert f"![{root.name}/zero_shot_fairness: zero_shot_fairness per group ({grouping})](" in zero_shot
    assert f"![{root.name}/retrieval_bias: retrieval_bias per group (@10)](" in section(text, "retrieval_bias")
    assert f"![{root.name}/mmbias_data: mmbias per group](" in section(text, "mmbias_data")


def copy_run(source, target, edit):
    """A copy of the results file of run folder ``source`` in ``target``, its JSON changed by ``edit``."""
    (suite_json,) = source.glob("*.json")
    results = json.loads(suite_json.read_text())
    edit(results)
    target.mkdir(parents=True)
    (target / suite_json.name).write_text(json.dumps(results))
    items = suite_json.with_suffix(".items.parquet")
    (target / items.name).write_bytes(items.read_bytes())
    return target


def test_a_second_group_draws_bars(tmp_path, measured):
    root, _ = measured

    def second_category(results):  # VLStereoSet's scores of a second category, with their intervals
        for score in ("vlrs", "vlbs", "ivlas"):
            results["metrics"][f"{score}/race"] = results["metrics"][f"{score}/gender"] / 2
            results["intervals"][f"{score}/race"] = [value / 2 for value in results["intervals"][f"{score}/gender"]]

    run = copy_run(root / "vlstereoset", tmp_path / "runs" / "two", second_category)
    report = build_report([run], tmp_path / "out")
    (bars,) = [path for path in report.images if "_bars_" in path.name]
    with Image.open(bars) as png:
        assert png.format == "PNG" and min(png.size) > 100
    assert f"![two: vlstereoset per group]({bars.name})" in report.markdown.read_text()


def test_the_caveat_is_for_a_tiny_model_only(tmp_path, measured):
    root, _ = measured

    def trained(results):
        results["config"]["tiny"] = False

    run = copy_run(root / "weat", tmp_path / "runs" / "trained", trained)
    text = build_report([run], tmp_path / "out").markdown.read_text()
    assert "**Direction:**" in text and "Caveat" not in text and TINY_CAVEAT not in text


def test_the_html_page_leads_each_headline_paragraph_with_its_label(measured):
    _, report = measured
    page = report.html.read_text()
    for label in ("What it measures:", "Sets compared:", "Direction:", "Caveat:"):
        assert f"<p><strong>{label}</strong> " in page, label
    assert page.count("<p><strong>What it measures:</strong> ") == len(RUNS)

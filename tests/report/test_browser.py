"""The report in a real headless browser (Debian's ``chromium``): every image loads, nothing reaches the console, a
screenshot is taken; and, without a browser, the HTML parses with every table holding the rows its sources say."""

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pandas as pd
import pytest
from PIL import Image

from vlbias.report import build_report
from vlbias.report.tables import skipped_rows
from vlbias.results import Results, write_results

CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
HEADLESS = ["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
# Injected into a copy of the page (the report itself holds no script): records load errors and console errors
# and warnings from the first moment, then, once everything has loaded, writes what each image decoded to.
PROBE = """<script>
const problems = [];
window.addEventListener("error", (e) => problems.push("error: " + (e.message || (e.target && e.target.src))), true);
for (const level of ["error", "warn"]) {
  const original = console[level];
  console[level] = (...args) => { problems.push(level + ": " + args.join(" ")); original(...args); };
}
window.addEventListener("load", () => {
  const images = [...document.images].map((i) => ({src: i.getAttribute("src"), complete: i.complete,
                                                   width: i.naturalWidth, height: i.naturalHeight}));
  const out = document.createElement("pre");
  out.id = "vlbias-probe";
  out.textContent = JSON.stringify({images, problems});
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A report of every kind of source: an association results file with skipped items (tables, forest, heatmap), a
    training run's trade-off log (bias over epochs, bias against accuracy), a pruning summary and an audit."""
    root = tmp_path_factory.mktemp("sources")
    pairs = [("men", "women", "career", "family"), ("men", "women", "math", "arts"), ("young", "old", "pleasant", "unpleasant")]  # fmt: skip
    items = [
        {"kind": "word", "test": f"t{i}", "x": x, "y": y, "a": a, "b": b, "effect_size": 0.6 - 0.5 * i}
        for i, (x, y, a, b) in enumerate(pairs)
    ]
    results = Results(
        suite="weat", model="bert", checkpoint=None, config={}, seed=0, n_items=3,
        metrics={f"t{i}/effect_size": row["effect_size"] for i, row in enumerate(items)},
        intervals={"t0/effect_size": [0.1, 0.9]}, p_values={"t0/effect_size": 0.01, "t0/effect_size@holm": 0.03},
        skipped=[{"item": "w1", "reason": "not in the vocabulary"}, {"item": "w2", "reason": "not in the vocabulary"},
                 {"item": "a.jpg", "reason": "image does not decode", "scope": "all"}],
    )  # fmt: skip
    write_results(root / "measure", results, items)
    key = "bias/mmbias/man_vs_woman/effect_size"
    epochs = pd.DataFrame({"epoch": [0, 1, 2], key: [0.8, 0.5, 0.3], f"{key}/ci_low": [0.5, 0.2, 0.0],
                           f"{key}/ci_high": [1.1, 0.8, 0.6], "val/accuracy": [0.4, 0.6, 0.55]})  # fmt: skip
    (root / "fit").mkdir()
    epochs.to_csv(root / "fit" / "tradeoff.csv", index=False)
    (root / "prune").mkdir()
    summary = {"model": "clip", "strategy": "ranked", "n_remove": 2, "embedding_dim": 8,
               "effect_sizes_before": {"t": 0.4}, "effect_sizes_after": {"t": 0.1},
               "zero_shot_accuracy": {"before": 0.5, "after": 0.45}}  # fmt: skip
    (root / "prune" / "prune.json").write_text(json.dumps(summary))
    (root / "audit").mkdir()
    entries = [
        {"suite": "mmbias", "dataset": "biasworld", "status": "measured", "reason": "", "results": "r.json"},
        {"suite": "counterbias", "dataset": "-", "status": "not applicable", "reason": "needs 'fill_mask'"},
    ]
    (root / "audit" / "audit.json").write_text(json.dumps({"entries": entries}))
    built = build_report([root], tmp_path_factory.mktemp("report"))
    return built, results, entries


class Tables(HTMLParser):
    """Every table of a page: its header cells and its body rows (lists of cell texts), and the image sources."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"headers": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1]["rows"][-1].append(self._cell)
            self._cell = None
        elif tag == "thead":
            self.tables[-1]["headers"] = self.tables[-1]["rows"].pop()


def test_the_html_parses_and_every_table_has_the_rows_of_its_sources(report):
    built, results, entries = report
    page = Tables()
    page.feed(built.html.read_text())
    page.close()
    by_header = {}
    for table in page.tables:
        by_header.setdefault(tuple(table["headers"]), []).append(table["rows"])
    (metrics,) = by_header[("metric", "value", "CI low", "CI high", "p", "p (Holm)", "p (BH)")]
    assert [row[0] for row in metrics] == list(results.metrics)
    (skipped,) = by_header[("skipped because", "scope", "items", "examples")]
    assert skipped == skipped_rows(results)
    (audit,) = by_header[("suite", "data", "status", "results or reason", "probe")]
    assert [row[:3] for row in audit] == [[e["suite"], e["dataset"], e["status"]] for e in entries]
    (pruning,) = by_header[("test", "effect size before", "after")]
    assert pruning == [["t", "0.4", "0.1"]]
    (front,) = [rows for header, tables in by_header.items() if header[0] == "Pareto-optimal run" for rows in tables]
    assert [row[1] for row in front] == ["epoch 2", "epoch 1"]  # lower |bias| or higher accuracy than any other
    (key,) = by_header[("key number", "value", "interval", "p", "p (Holm)")]  # no BH p-value in these results
    assert key[0] == ["t0/effect_size", "0.6", "[0.1, 0.9]", "0.01", "0.03"]
    (counts,) = by_header[("count", "value")]
    assert counts == [["items measured", "3"], ["skipped (entries)", "3"]]
    weat, mmbias = by_header[("name", "meaning")]  # the results file's suite; the logged and pruned effect sizes
    assert [row[0] for row in weat] == [row[0] for row in mmbias] == ["effect_size"]
    assert len(page.images) == 4 and all((built.html.parent / name).is_file() for name in page.images)


def chromium(*arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *HEADLESS, *arguments], capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
def test_every_image_loads_without_console_errors_in_chromium(report, tmp_path):
    built, _, _ = report
    copy = shutil.copytree(built.html.parent, tmp_path / "probe")
    page = (copy / "index.html").read_text()
    assert "<script" not in page  # the report is script-free; the probe goes in a copy
    (copy / "probe.html").write_text(page.replace("<head>", "<head>" + PROBE, 1))
    run = chromium("--virtual-time-budget=10000", "--dump-dom", (copy / "probe.html").as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="vlbias-probe">(.*?)</pre>', run.stdout, re.S)
    assert found, f"the page did not finish loading: {run.stdout[-500:]}"
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert probe["problems"] == []
    assert len(probe["images"]) == len(built.images) == 4
    for image in probe["images"]:
        with Image.open(copy / image["src"]) as png:
            assert image["complete"] and (image["width"], image["height"]) == png.size, image
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    shot = tmp_path / "report.png"
    run = chromium("--window-size=1200,1600", f"--screenshot={shot}", built.html.as_uri())
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    with Image.open(shot) as screenshot:
        assert screenshot.size == (1200, 1600)
        assert len(screenshot.convert("L").getcolors(maxcolors=1 << 16) or range(1 << 16)) > 10  # not blank

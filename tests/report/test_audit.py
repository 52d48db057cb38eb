"""``vlbias audit``: a tiny CLIP and a tiny ALBEF over the shared public data and BiasWorld, every suite listed as
measured or with the reason it was not, in ``audit.json`` and in the report; the numbers are ``vlbias measure``'s;
a failing suite is one line and the rest still runs; data sets are found by their readers' files."""

import json
from pathlib import Path

import pytest

import vlbias.workflows.audit
from tests.data.corpus import write_karpathy_corpus
from vlbias.cli import main
from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.results import Results, read_results, write_results
from vlbias.suites.registry import list_suites
from vlbias.workflows.audit import DATA_ABSENT, FAILED, MEASURED, NOT_APPLICABLE, audit, find_datasets
from vlbias.workflows.options import AuditOptions

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SMALL = ["--biasworld.eval_per_combination", "2", "--threads", "1"]


@pytest.fixture(scope="module", params=["clip", "albef"])
def audited(request, tmp_path_factory):
    """``vlbias audit`` of a tiny model over ``../shared/data`` and BiasWorld: (model, out, entries by key)."""
    if not DATA.is_dir():
        pytest.skip(f"the shared public data {str(DATA)!r} is absent")
    out = tmp_path_factory.mktemp(f"audit_{request.param}")
    main(["audit", "--model", request.param, "--tiny", "--data_root", str(DATA), "--out", str(out), *SMALL])
    entries = json.loads((out / "audit.json").read_text())["entries"]
    return request.param, out, {(entry["suite"], entry["dataset"]): entry for entry in entries}


def audit_table(report: str) -> list[list[str]]:
    """The rows of the report's audit table."""
    section = report.split("### Audit: ", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")][2:]  # after the header and its rule
    rows = [line.strip("|").split("|") for line in lines]
    return [[cell.strip() for cell in row] for row in rows]


def test_every_suite_is_measured_or_has_a_reason(audited):
    model, out, entries = audited
    assert {suite for suite, _ in entries} == set(list_suites())
    for entry in entries.values():
        assert entry["status"] in (MEASURED, NOT_APPLICABLE, DATA_ABSENT, FAILED)
        if entry["status"] == MEASURED:
            results = read_results(out / entry["results"])
            assert results.suite == entry["suite"] and results.model == model and results.n_items > 0
        else:
            assert entry["reason"] and entry["results"] is None
    assert entries[("mmbias", "biasworld")]["status"] == MEASURED
    # the shared MMBias data: the tiny models' 21-word vocabulary reads its phrases as [UNK] only, so they are
    # skipped by name and nothing is left to measure; the audit says so instead of measuring placeholders
    real_mmbias = entries[("mmbias", "mmbias")]
    assert real_mmbias["status"] == DATA_ABSENT and "texts the model cannot see" in real_mmbias["reason"]
    assert entries[("weat", "seat")]["status"] == MEASURED
    assert ("weat", "biasworld") not in entries  # WEAT reads no BiasWorld stimuli: no line for BiasWorld
    if not (DATA / "vlstereoset" / "images").is_dir():
        vlstereoset = entries[("vlstereoset", "vlstereoset")]
        assert vlstereoset["status"] == DATA_ABSENT and "image folder" in vlstereoset["reason"]
    if model == "clip":  # EMBED only
        for suite in ("counterbias", "entity_association"):
            entry = entries[(suite, "-")]
            assert entry["status"] == NOT_APPLICABLE and "'fill_mask'" in entry["reason"]
        assert entries[("weat", "seat")]["options"] == {"source": "embed"}
    else:  # ALBEF has every capability: the suites' default probes, FILL_MASK suites on BiasWorld
        assert entries[("counterbias", "biasworld")]["status"] == MEASURED
        assert entries[("entity_association", "biasworld")]["status"] == MEASURED
        assert entries[("weat", "seat")]["options"] == {"source": "token_states"}
        assert entries[("counterbias", "-")]["status"] == DATA_ABSENT  # no VL-Bias folder in the shared data
    assert entries[("mmbias", "biasworld")]["options"] == {"probe": "embed"}


def test_the_report_lists_every_entry_and_shows_every_measured_suite(audited):
    _, out, entries = audited
    report = (out / "report" / "report.md").read_text()
    rows = audit_table(report)
    assert len(rows) == len(entries)
    for suite, dataset, status, outcome, _ in rows:
        entry = entries[(suite, dataset)]
        assert status == entry["status"] and outcome == (entry["results"] or entry["reason"]).replace("|", "\\|")
    for entry in entries.values():
        if entry["status"] == MEASURED:
            folder, name = entry["results"].split("/")[-2:]
            assert f"### {folder}: {entry['suite']} ({name})" in report  # its results section
    assert (out / "report" / "index.html").is_file()


@pytest.mark.parametrize("audited", ["clip"], indirect=True)
def test_the_numbers_are_those_of_vlbias_measure(audited, tmp_path):
    _, out, entries = audited
    options = json.dumps(
        {"statistics": vlbias.workflows.audit.QUICK_STATISTICS}
    )  # the quick preset, as audit applies it
    main(["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--out", str(tmp_path), *SMALL,
          "--suite_options", options])  # fmt: skip
    measured = read_results(tmp_path / "mmbias.json")
    audited_results = read_results(out / entries[("mmbias", "biasworld")]["results"])
    assert audited_results.metrics == pytest.approx(measured.metrics)
    assert audited_results.intervals == measured.intervals and audited_results.p_values == measured.p_values


def test_a_failing_suite_is_one_line_and_the_rest_runs(tmp_path, monkeypatch):
    real = vlbias.workflows.audit.run_suite

    def run_suite(suite, *args, **kwargs):
        if suite.name == "vlstereoset":
            raise RuntimeError("probe exploded\nsecond line")
        return real(suite, *args, **kwargs)

    monkeypatch.setattr(vlbias.workflows.audit, "run_suite", run_suite)
    stale = Results(suite="weat", model="clip", checkpoint=None, config={}, seed=0, n_items=1, metrics={"d": 1.0})
    write_results(tmp_path / "results" / "weat-old", stale, [{"d": 1.0}])  # an earlier audit's, not this one's
    (tmp_path / "audit.json").write_text("{}")  # the folder is that earlier audit's: replaced whole
    small = BiasWorldOptions(eval_per_combination=2)
    path = audit(
        AuditOptions(model="clip", out=str(tmp_path), tiny=True, suites=["mmbias", "vlstereoset"], biasworld=small)
    )
    entries = {(e["suite"], e["dataset"]): e for e in json.loads(path.read_text())["entries"]}
    assert entries[("vlstereoset", "biasworld")] | {"options": None} == {
        "suite": "vlstereoset", "dataset": "biasworld", "status": FAILED,
        "reason": "RuntimeError: probe exploded", "options": None, "results": None,
    }  # fmt: skip
    assert entries[("mmbias", "biasworld")]["status"] == MEASURED
    assert ("mmbias", "-") not in entries  # measured on BiasWorld, no data root asked for: nothing absent
    report = (tmp_path / "report" / "report.md").read_text()
    assert ["vlstereoset", "biasworld", FAILED, "RuntimeError: probe exploded", "probe=embed"] in audit_table(report)
    assert "weat-old" not in report and "### mmbias-biasworld: mmbias (mmbias.json)" in report
    assert not (tmp_path / "results" / "weat-old").exists()


def test_the_console_table_has_a_header_and_each_suite_once_per_data_source(tmp_path, capsys):
    main(["audit", "--model", "clip", "--tiny", "--suites", "[mmbias, weat]", "--out", str(tmp_path), *SMALL,
          "--suite_options", "{mmbias: {statistics: {n_permutations: 100, n_bootstrap: 50}}}"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["suite", "data", "set", "status", "results", "file", "or", "reason"]
    rows = [line.split(maxsplit=3) for line in lines[1:-1]]
    assert [row[:3] for row in rows] == [["mmbias", "biasworld", MEASURED], ["weat", "-", "data"]]
    assert rows[1][3].split(maxsplit=1) == ["absent", "no data root given, and the suite reads no BiasWorld stimuli"]


def test_data_sets_are_found_by_their_readers_files(tmp_path):
    (tmp_path / "mm").mkdir()
    (tmp_path / "mm" / "textual_phrases.json").write_text("{}")
    (tmp_path / "specs" / "coco").mkdir(parents=True)
    (tmp_path / "specs" / "coco" / "weat6.jsonl").write_text("{}")
    (tmp_path / "vl").mkdir()
    (tmp_path / "vl" / "annotations.csv").write_text("image,concept,gender\n")
    (tmp_path / "entities" / "purse" / "female").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "coco").mkdir()  # a Karpathy split file, and a LAVIS one that is then not a second data set
    (tmp_path / "coco" / "dataset_coco.json").write_text("{}")
    (tmp_path / "coco" / "coco_karpathy_test.json").write_text("[]")
    (tmp_path / "flickr").mkdir()  # ALBEF/LAVIS split files: the test split is the data set
    for split in ("train", "val", "test"):
        (tmp_path / "flickr" / f"flickr30k_{split}.json").write_text("[]")
    (tmp_path / "fairface").mkdir()  # FairFace's val label file; CelebA's attribute file in the release's Anno/
    (tmp_path / "fairface" / "fairface_label_val.csv").write_text("file,age,gender,race,service_test\n")
    (tmp_path / "celeba" / "Anno").mkdir(parents=True)
    (tmp_path / "celeba" / "Anno" / "list_attr_celeba.txt").write_text("0\n")
    (tmp_path / "questions").mkdir()  # a bias_qa question file is a .jsonl too, but no SEAT spec
    (tmp_path / "questions" / "sbbench.jsonl").write_text('{"id": "q", "options": ["a", "b"], "kinds": []}\n')
    (tmp_path / "pairs").mkdir()  # a counterfactual_answers question-set file: neither a SEAT spec nor bias_qa's
    (tmp_path / "pairs" / "pairs.jsonl").write_text('{"set": "s", "image": "a.png", "question": "Q", "options": []}\n')
    (tmp_path / "prompts").mkdir()  # an open_generation prompt file: a question-set file without options
    (tmp_path / "prompts" / "describe.jsonl").write_text('{"set": "s", "image": "a.png", "question": "Describe."}\n')
    found = {
        suite: [name for name, _ in find_datasets(suite, tmp_path)] for suite in vlbias.workflows.audit.DATA_MARKERS
    }
    assert found == {"mmbias": ["mm"], "weat": ["specs"], "counterbias": ["vl"], "entity_association": ["entities"],
                     "vlstereoset": [], "retrieval_bias": ["coco", "flickr"], "gallery_skew": ["celeba", "fairface"],
                     "zero_shot_fairness": ["celeba", "fairface"], "bias_qa": ["questions"],
                     "counterfactual_answers": ["pairs"], "open_generation": ["pairs", "prompts"]}  # fmt: skip
    assert find_datasets("bias_qa", tmp_path) == [("questions", tmp_path / "questions" / "sbbench.jsonl")]
    assert find_datasets("counterfactual_answers", tmp_path) == [("pairs", tmp_path / "pairs" / "pairs.jsonl")]
    assert find_datasets("retrieval_bias", tmp_path) == [
        ("coco", tmp_path / "coco" / "dataset_coco.json"),
        ("flickr", tmp_path / "flickr" / "flickr30k_test.json"),
    ]  # the file the suite reads
    (tmp_path / "coco" / "dataset_flickr30k.json").write_text("{}")  # two corpora in one folder: named by file
    assert [name for name, _ in find_datasets("retrieval_bias", tmp_path / "coco")] == [
        "coco-dataset_coco",
        "coco-dataset_flickr30k",
    ]
    assert find_datasets("mmbias", tmp_path / "mm") == [("mm", tmp_path / "mm")]  # the root itself
    assert find_datasets("weat", tmp_path / "specs") == [("coco", tmp_path / "specs" / "coco")]


def test_retrieval_bias_measures_a_karpathy_caption_file_under_the_data_root(tmp_path):
    corpus = tmp_path / "data" / "coco"
    write_karpathy_corpus(corpus).rename(corpus / "dataset_coco.json")  # COCO's layout: val2014/ beside the file
    (corpus / "images" / "val2014").rename(corpus / "val2014")
    path = audit(
        AuditOptions(model="clip", out=str(tmp_path / "out"), tiny=True, suites=["retrieval_bias"],
                     data_root=str(tmp_path / "data"), suite_options={"retrieval_bias": {"k": [1]}},
                     biasworld=BiasWorldOptions(eval_per_combination=2))
    )  # fmt: skip
    entries = {(e["suite"], e["dataset"]): e for e in json.loads(path.read_text())["entries"]}
    assert set(entries) == {("retrieval_bias", "biasworld"), ("retrieval_bias", "coco")}  # no "data absent"
    measured = entries[("retrieval_bias", "coco")]
    assert measured["status"] == MEASURED, measured
    results = read_results(tmp_path / "out" / measured["results"])
    assert results.config["suite_config"]["data"]["data"] == str(corpus / "dataset_coco.json")
    assert results.metrics["gallery/n_man"] == results.metrics["gallery/n_woman"] == 1  # the test split's 2 images


def test_bad_input_is_one_clear_error(tmp_path, run_cli):
    code, _, err = run_cli(["audit", "--model", "clip", "--tiny", "--data_root", str(tmp_path / "nowhere"),
                        "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 2 and "Traceback" not in err and "nowhere" in err and "is not a directory" in err
    code, _, err = run_cli(["audit", "--model", "clip", "--tiny", "--suites", "[mmbias, wat]", "--out", str(tmp_path)])
    assert code == 2 and "'wat'" in err and "weat" in err
    code, _, err = run_cli(["audit", "--model", "clip", "--tiny", "--seed", "-1", "--out", str(tmp_path)])
    assert code == 2 and err.count("\n") == 1 and "`--seed`" in err and "-1" in err  # before any model loads


def test_a_folder_that_is_not_an_earlier_audit_is_refused_before_the_model_loads(tmp_path, run_cli, monkeypatch):
    """A user's folder (``notes.txt`` in it) is never replaced: one line naming it and what it holds, exit 2,
    before any model loads, and the folder as it was."""
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.setattr(vlbias.workflows.audit, "load_model", lambda options: pytest.fail("the model was loaded"))
    code, out, err = run_cli(["audit", "--model", "clip", "--tiny", "--out", str(tmp_path)])
    assert code == 2 and out == ""
    assert err == (
        f"vlbias: error: Output folder {str(tmp_path)!r} holds what vlbias audit does not write (notes.txt): give a "
        "new or empty folder (vlbias audit replaces a folder only when it is an earlier output of it).\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("model", ["open_clip", "siglip", "siglip2"])
def test_the_open_clip_and_siglip_families_are_audited(model, tmp_path):
    """``vlbias audit --model M --tiny`` of the dual encoders of issue 40 (EMBED and MATCH), quick statistics on a
    small BiasWorld: every suite that reads EMBED or MATCH is measured on it, the FILL_MASK ones are listed as not
    applicable by capability, and the report shows every measured suite."""
    out = tmp_path / "out"
    main(["audit", "--model", model, "--tiny", "--out", str(out), *SMALL])
    entries = {(e["suite"], e["dataset"]): e for e in json.loads((out / "audit.json").read_text())["entries"]}
    assert {suite for suite, _ in entries} == set(list_suites())
    measured = {key for key, entry in entries.items() if entry["status"] == MEASURED}
    embed = ("mmbias", "vlstereoset", "retrieval_bias", "gallery_skew", "zero_shot_fairness")
    assert measured == {(suite, "biasworld") for suite in embed}
    for key in measured:
        results = read_results(out / entries[key]["results"])
        assert results.model == model and results.n_items > 0
        statistics = results.config["suite_config"]["statistics"]
        assert {name: statistics[name] for name in vlbias.workflows.audit.QUICK_STATISTICS if name in statistics} == {
            name: value for name, value in vlbias.workflows.audit.QUICK_STATISTICS.items() if name in statistics
        }
    for suite in ("counterbias", "entity_association"):
        entry = entries[(suite, "-")]
        assert entry["status"] == NOT_APPLICABLE and f"needs capability 'fill_mask'; model {model!r}" in entry["reason"]
    assert ("weat", "biasworld") not in entries  # WEAT reads no BiasWorld stimuli: no line for BiasWorld
    report = (out / "report" / "report.md").read_text()
    assert len(audit_table(report)) == len(entries)
    for key in measured:
        folder, name = entries[key]["results"].split("/")[-2:]
        assert f"### {folder}: {key[0]} ({name})" in report

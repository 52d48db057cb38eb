"""A ``vlbias debias`` comparison (``compare.csv``) in the report: its figure, every method's row with intervals,
a method that was not fitted with its reason, and a cell that is not a number named."""

from vlbias.report.build import build_report

EFFECT = "mmbias/x/effect_size"
HEADER = f"method,{EFFECT},{EFFECT}/ci_low,{EFFECT}/ci_high,zero_shot_accuracy,zero_shot_accuracy/ci_low," \
         "zero_shot_accuracy/ci_high,not_fitted"  # fmt: skip


def test_a_comparison_is_a_figure_and_a_table_of_every_method(tmp_path):
    run = tmp_path / "compare"
    run.mkdir()
    (run / "compare.csv").write_text(
        f"{HEADER}\nnone,0.8,0.5,1.1,0.9,0.85,0.95,\northo,0.2,-0.1,0.5,0.88,0.83,0.93,\n"
        "sfid,,,,,,,Debiaser 'sfid' needs `reference_images`\n"
    )
    report = build_report([run], tmp_path / "report")
    text = report.markdown.read_text()
    assert "### Debiasing methods: compare" in text
    assert "| none | 0.8 [0.5, 1.1] | 0.9 [0.85, 0.95] |  |" in text
    assert "| ortho | 0.2 [-0.1, 0.5] | 0.88 [0.83, 0.93] |  |" in text
    assert "| sfid | n/a | n/a | Debiaser 'sfid' needs `reference_images` |" in text
    assert len(report.images) == 1 and report.images[0].read_bytes()[:4] == b"\x89PNG"
    assert report.problems == []


def test_a_cell_that_is_not_a_number_is_named_and_left_out(tmp_path):
    run = tmp_path / "compare"
    run.mkdir()
    (run / "compare.csv").write_text(f"{HEADER}\nnone,n/a,0.5,1.1,0.9,0.85,0.95,\northo,0.2,-0.1,0.5,0.88,0.83,0.93,\n")
    report = build_report([run], tmp_path / "report")
    ((where, problem),) = report.problems
    assert where.endswith("compare.csv") and f"column {EFFECT!r}" in problem and "'n/a' (line 2)" in problem
    assert "| none | n/a [0.5, 1.1] | 0.9 [0.85, 0.95] |  |" in report.markdown.read_text()


def test_retrieval_recall_measured_by_the_comparison_is_a_column_with_its_interval(tmp_path):
    run = tmp_path / "compare"
    run.mkdir()
    recall = "retrieval_recall/img_r1"
    header = HEADER.replace(",not_fitted", f",{recall},{recall}/ci_low,{recall}/ci_high,not_fitted")
    (run / "compare.csv").write_text(f"{header}\nnone,0.8,0.5,1.1,0.9,0.85,0.95,0.3,0.2,0.4,\n")
    text = build_report([run], tmp_path / "report").markdown.read_text()
    assert f"| method | {EFFECT} [interval] | zero_shot_accuracy [interval] | {recall} [interval] |" in text
    assert "| none | 0.8 [0.5, 1.1] | 0.9 [0.85, 0.95] | 0.3 [0.2, 0.4] |  |" in text

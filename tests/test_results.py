import json
import math
import os
import stat

import pandas as pd
import pytest
import torch

from vlbias.atomic import atomic_write
from vlbias.errors import ConfigError, SchemaError
from vlbias.results import SCHEMA_VERSION, Results, is_count, logged_bias_keys, read_items, read_results, write_results


def make_results(**overrides) -> Results:
    fields = dict(
        suite="mmbias",
        model="clip",
        checkpoint=None,
        config={"data": "biasworld"},
        seed=3,
        n_items=10,
        metrics={"t/effect_size": 0.5},
        intervals={"t/effect_size": [0.1, 0.9]},
        p_values={"t/effect_size": 0.01},
        skipped=[{"item": "img7.jpg", "reason": "file missing"}],
    )
    return Results(**(fields | overrides))


def test_round_trip(tmp_path):
    path = write_results(tmp_path / "out", make_results(), [{"test": "t", "effect_size": 0.5}])
    assert path == tmp_path / "out" / "mmbias.json"
    back = read_results(path)
    assert back == make_results(created=back.created, git_commit=back.git_commit)
    assert back.schema_version == SCHEMA_VERSION and back.seed == 3
    assert read_items(path).to_dict("records") == [{"test": "t", "effect_size": 0.5}]


def test_undefined_numbers_are_written_as_null(tmp_path):
    """NaN (and None) mean "undefined": no item reached the statistic."""
    path = write_results(tmp_path, make_results(metrics={"a": math.nan, "b": None, "c": 1.5}))
    assert json.loads(path.read_text())["metrics"] == {"a": None, "b": None, "c": 1.5}


@pytest.mark.parametrize(
    ("overrides", "items", "match"),
    [
        ({"metrics": {"lmss/mean": -6.91e296}}, None, r"metric 'lmss/mean' is -6\.91e\+296, beyond ±1e\+12"),
        ({"metrics": {"b": math.inf}}, None, "metric 'b' is inf, not finite"),
        ({"metrics": {"b": torch.tensor(-math.inf)}}, None, "metric 'b' is -inf, not finite"),
        ({"metrics": {"b": "high"}}, None, "metric 'b' is 'high', a str, not a number"),
        ({"intervals": {"t": [0.1, 2e13]}}, None, r"interval 't' is 2e\+13, beyond"),
        ({"intervals": {"t": [0.1]}}, None, r"interval 't' should be \[lo, hi\]"),
        ({"p_values": {"t": 1.5}}, None, r"p-value 't' is 1.5, outside \[0, 1\]"),
        ({}, [{"score": 0.5}, {"score": math.inf}], "item table column 'score', row 1, is inf, not finite"),
        ({}, [{"score": -1e300}], r"item table column 'score', row 0, is -1e\+300, beyond"),
    ],
)
def test_absurd_numbers_are_refused_and_the_old_result_stays(tmp_path, overrides, items, match):
    write_results(tmp_path, make_results(seed=1), [{"score": 0.25}])
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    with pytest.raises(SchemaError, match=match) as refused:
        write_results(tmp_path, make_results(**overrides), items)
    assert "mmbias.json" in str(refused.value) and "left as it was" in str(refused.value)
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_nan_in_the_item_table_is_missing_not_refused(tmp_path):
    path = write_results(tmp_path, make_results(), [{"p_value": math.nan}, {"p_value": 0.5}])
    assert read_items(path)["p_value"].isna().tolist() == [True, False]


def test_a_crash_while_writing_leaves_no_file(tmp_path, monkeypatch):
    def explode(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", explode)
    with pytest.raises(RuntimeError, match="disk full"):
        write_results(tmp_path, make_results(), [{"x": 1}])
    assert list(tmp_path.iterdir()) == []


def test_rewriting_replaces_the_old_file_whole(tmp_path):
    write_results(tmp_path, make_results(seed=1))
    write_results(tmp_path, make_results(seed=2))
    assert read_results(tmp_path / "mmbias.json").seed == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mmbias.items.parquet", "mmbias.json"]


def test_unwritable_output_directory(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match="Output directory .*a-file/out' is not writable"):
        write_results(blocker / "out", make_results())


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d.pop("seed"), r"missing field\(s\) \['seed'\]"),
        (lambda d: d.update(extra=1), r"unknown field\(s\) \['extra'\]"),
        (lambda d: d.update(n_items="ten"), "field 'n_items' should be int but is str"),
        (lambda d: d.update(seed=True), "field 'seed' should be int but is bool"),
        (lambda d: d.update(intervals={"x": [1]}), r"interval 'x' should be \[lo, hi\]"),
        (lambda d: d.update(skipped=[{"item": "a"}]), "each skipped entry needs 'item' and 'reason'"),
        (lambda d: d.update(flags=[{"flag": "a"}]), "each flags entry needs 'flag', 'metric' and 'reason'"),
        (lambda d: d.update(schema_version=99), f"schema_version 99 is not {SCHEMA_VERSION}"),
        (lambda d: d.pop("items"), r"missing field\(s\) \['items'\]"),
        (lambda d: d.update(items={"file": "../elsewhere.parquet", "sha256": "0"}), "field 'items' should be"),
    ],
)
def test_bad_results_files_are_explained(tmp_path, edit, match):
    path = write_results(tmp_path, make_results())
    payload = json.loads(path.read_text())
    edit(payload)
    path.write_text(json.dumps(payload))
    with pytest.raises(SchemaError, match=match):
        read_results(path)


def test_a_results_file_from_before_flags_reads_without_any(tmp_path):
    path = write_results(tmp_path, make_results())
    payload = json.loads(path.read_text())
    del payload["flags"]
    path.write_text(json.dumps(payload))
    assert read_results(path).flags == []


def test_an_item_table_from_another_run_is_refused_by_name(tmp_path):
    """The old table beside the new JSON (what a kill between two plain writes left) is not read as the new
    result's."""
    write_results(tmp_path / "old", make_results(seed=1), [{"test": "old"}])
    path = write_results(tmp_path / "new", make_results(seed=2), [{"test": "new"}])
    (tmp_path / "new" / "mmbias.items.parquet").write_bytes((tmp_path / "old" / "mmbias.items.parquet").read_bytes())
    for read in (read_results, read_items):
        with pytest.raises(
            SchemaError, match="mmbias.items.parquet' does not belong to results file .*new/mmbias.json"
        ):
            read(path)
    (tmp_path / "new" / "mmbias.items.parquet").unlink()
    with pytest.raises(SchemaError, match="mmbias.items.parquet' of results file .*mmbias.json' does not exist"):
        read_results(path)


def test_a_parquet_path_is_read_as_it_is(tmp_path):
    write_results(tmp_path, make_results(), [{"test": "t"}])
    assert read_items(tmp_path / "mmbias.items.parquet")["test"].tolist() == ["t"]
    with pytest.raises(SchemaError, match="other.items.parquet' does not exist"):
        read_items(tmp_path / "other.items.parquet")


def test_not_json_and_missing_file(tmp_path):
    (tmp_path / "broken.json").write_text("{ half")
    with pytest.raises(SchemaError, match="broken.json' is not valid JSON"):
        read_results(tmp_path / "broken.json")
    with pytest.raises(SchemaError, match="nothing.json' does not exist"):
        read_results(tmp_path / "nothing.json")


def test_results_files_get_the_mode_a_plain_open_gives(tmp_path):
    """A colleague on the same cluster can read them: 0666 less the umask, not mkstemp's 0600."""
    previous = os.umask(0o022)
    try:
        atomic_write(tmp_path / "shared.json", lambda handle: handle.write(b"{}"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "shared.json").stat().st_mode) == 0o644


def test_counts_are_named_by_a_segment_starting_n_():
    counts = ["n_skipped/unknown", "n_truncated", "n_images", "all/n_queries", "bias/counterbias/n_skipped/image"]
    metrics = ["man_vs_woman/cross_modal/effect_size", "zero_shot/muslim/pleasant_share", "B_L/purse", "lmss/mean"]
    assert all(is_count(name) for name in counts) and not any(is_count(name) for name in metrics)


def test_logged_bias_keys_leave_out_intervals_p_values_and_counts():
    columns = [
        "epoch",
        "val/i2t_accuracy",
        "bias/mmbias/man_vs_woman/effect_size",
        "bias/mmbias/man_vs_woman/effect_size/ci_low",
        "bias/mmbias/man_vs_woman/effect_size/ci_high",
        "bias/mmbias/man_vs_woman/effect_size/p_value",
        "bias/mmbias/n_skipped/empty",
        "bias/counterbias/B@V-L",
        "bias/counterbias/n_attack_failed",
    ]
    assert logged_bias_keys(columns) == ["bias/mmbias/man_vs_woman/effect_size", "bias/counterbias/B@V-L"]

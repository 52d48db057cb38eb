import json
import math
import os
import stat

import pandas as pd
import pytest

from vlbias.atomic import atomic_write
from vlbias.errors import ConfigError, SchemaError
from vlbias.results import SCHEMA_VERSION, Results, read_items, read_results, write_results


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


def test_non_finite_numbers_are_written_as_null(tmp_path):
    path = write_results(tmp_path, make_results(metrics={"a": math.nan, "b": math.inf}))
    assert json.loads(path.read_text())["metrics"] == {"a": None, "b": None}


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
        (lambda d: d.update(schema_version=99), "schema_version 99 is not 1"),
    ],
)
def test_bad_results_files_are_explained(tmp_path, edit, match):
    path = write_results(tmp_path, make_results())
    payload = json.loads(path.read_text())
    edit(payload)
    path.write_text(json.dumps(payload))
    with pytest.raises(SchemaError, match=match):
        read_results(path)


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

"""The shared text-file reader: where a byte that is not UTF-8 sits (line, column, field in JSON, JSONL, YAML
and CSV), malformed files named with their line, and the csv module's process-wide field limit left as found."""

import csv
import json

import pytest

from vlbias.data.seat import read_specs
from vlbias.data.text_files import json_field, read_csv, read_json, read_text, yaml_field
from vlbias.errors import InputError


def test_a_byte_in_a_json_lines_file_is_placed_by_line_and_field(tmp_path):
    spec = {key: {"category": key, "examples": ["a", "b"]} for key in ("targ1", "targ2", "attr1", "attr2")}
    lines = [json.dumps(spec)] * 3
    path = tmp_path / "tests.jsonl"
    path.write_bytes(
        "\n".join(lines).encode().replace(b'"attr2", "examples": ["a"', b'"attr2", "examples": ["\xff"', 1)
    )
    with pytest.raises(InputError, match=r"tests\.jsonl': line 1, column \d+, field attr2\.examples\[0\]: byte 0xff"):
        read_specs(path)
    path.write_bytes(b"\n".join([lines[0].encode(), lines[1].encode(), lines[2].encode().replace(b'"b"', b'"\xc3"')]))
    with pytest.raises(InputError, match=r"line 3, column \d+, field targ1\.examples\[1\]: byte 0xc3 is not UTF-8"):
        read_specs(path)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"category_phrases": {"No disability": ["a", "b\ufffd"]}}', "category_phrases['No disability'][1]"),
        ('{"groups": {"f\ufffdmale": "woman"}}', "groups['f\ufffdmale'] (the key)"),
        ('["\ufffd"]', "[0]"),
        ('"\ufffd"', "(the whole value)"),
        ('{"a": 1}', None),
        ("not json \ufffd", None),
    ],
)
def test_json_field_names_the_key_path(text, field):
    assert json_field(text) == field


def test_yaml_field_names_the_key_path():
    assert yaml_field("templates:\n  - name: bags\n    entities: [purse, 'b\ufffd']\n") == "templates[0].entities[1]"
    assert yaml_field("a: [unclosed") is None


def test_missing_folders_and_malformed_files_are_named(tmp_path):
    with pytest.raises(InputError, match=r"^Data '.*absent\.csv' does not exist$"):
        read_text(tmp_path / "absent.csv", "Data")
    with pytest.raises(InputError, match=r"^Data '.*' is not a regular file$"):
        read_text(tmp_path, "Data")
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": [1,\n 2,, 3]}')
    with pytest.raises(InputError, match=r"broken\.json' is not a JSON file: .* at line 2, column 4"):
        read_json(broken, "Data")


def test_read_csv_numbers_records_by_their_first_line_and_restores_the_field_limit(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('a,b\n\n"x\ny",1\n' + "z," + "w" * 200_000 + "\n")
    limit = csv.field_size_limit()
    with pytest.raises(InputError, match=r"data\.csv': line 5, field 'b': 200,000 characters"):
        read_csv(path, "Data")
    assert csv.field_size_limit() == limit
    path.write_text('\ufeffa,b\n\n"x\ny",1\n')
    assert [(r.line, r.cells) for r in read_csv(path, "Data")] == [(1, ["a", "b"]), (3, ["x\ny", "1"])]
    assert csv.field_size_limit() == limit

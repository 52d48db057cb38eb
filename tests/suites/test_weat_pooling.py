"""The ``weat`` suite's default pooling (``pooling="model"``): the adapter's own sentence pooling where it has
one (``sentence_bert``: its checkpoint's), else [CLS]; each row of the item table records the pooling used."""

import pytest

from tests.suites.test_weat import FakeAdapter, seat_dir
from vlbias.models.registry import load
from vlbias.suites.options import WEATOptions
from vlbias.suites.run import measure_suite
from vlbias.suites.weat import WEATSuite


def rows(tmp_path, adapter, **options) -> dict:
    (row,) = measure_suite(
        WEATSuite.from_path(seat_dir(tmp_path), WEATOptions(**options).with_statistics(n_bootstrap=20)), adapter, seed=0
    ).items
    return row


@pytest.mark.parametrize("own", ["mean", "cls"])
def test_default_is_the_adapters_own_pooling(tmp_path, own):
    adapter = load("sentence_bert", tiny=True, device="cpu", options={"pooling": own})
    default, explicit = rows(tmp_path, adapter), rows(tmp_path, adapter, pooling=own)
    assert default["pooling"] == explicit["pooling"] == own
    assert default["effect_size"] == explicit["effect_size"]
    other = rows(tmp_path, adapter, pooling="cls" if own == "mean" else "mean")
    assert other["effect_size"] != default["effect_size"]  # the option reaches the embedding


def test_an_adapter_without_a_pooling_of_its_own_pools_with_cls(tmp_path):
    default, cls = rows(tmp_path, FakeAdapter()), rows(tmp_path, FakeAdapter(), pooling="cls")
    assert default["pooling"] == "cls" and default["effect_size"] == cls["effect_size"]


def test_rows_not_pooled_record_no_pooling(tmp_path):
    """``source="embed"`` takes the model's embedding: there is no pooling to record."""
    clip = load("clip", tiny=True, device="cpu")
    assert rows(tmp_path, clip, source="embed")["pooling"] == ""

"""The retrieval table's reference levels (:func:`vlbias.experiments.retrieval_table.reference_levels`): chance, and
the highest TR R@K that repeated captions allow."""

from types import SimpleNamespace

import pytest

from vlbias.experiments import retrieval_table


def test_repeated_captions_cap_text_retrieval(monkeypatch):
    captions = ["a man cooking.", "a man cooking.", "a person sewing.", *["a woman repairing."] * 3]
    made = {}

    def datamodule(**options):
        made.update(options)
        return SimpleNamespace(
            world=SimpleNamespace(items=lambda split: [SimpleNamespace(caption=c) for c in captions])
        )

    monkeypatch.setattr(retrieval_table, "BiasWorldDataModule", datamodule)
    levels = retrieval_table.reference_levels(seed=7)
    # One caption of six is unique (a hit at 1 is possible for its image only); two copies fit in the top 2,
    # three in the top 3, so every image can be a hit at 5 and 10. Image retrieval's chance R@1 is 1/6.
    assert levels == pytest.approx(
        {"images": 6, "ir_r1_chance": 100 / 6, "tr_r1_ceiling": 100 / 6, "tr_r5_ceiling": 100, "tr_r10_ceiling": 100}
    )
    assert made["seed"] == 7 and made["bias_strength"] == 0.0 and made["n_train"] == 2048  # the config's data


def test_levels_of_the_configured_test_split():
    levels = retrieval_table.reference_levels(seed=0)
    assert levels["images"] == 48 and levels["ir_r1_chance"] == pytest.approx(100 / 48)
    assert 0 < levels["tr_r1_ceiling"] < 100 and levels["tr_r10_ceiling"] == 100

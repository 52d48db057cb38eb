"""The chat-mitigation comparison on one seed at a toy size: every method measured on the same test split, the
training-free ones on the baseline's weights, the fine-tuning from the same initialisation."""

import math

from vlbias.experiments.chat_mitigation import SETTINGS, methods, seed_rows


def test_one_seed_gives_every_method_a_finite_row():
    settings = {**SETTINGS, "epochs": 1, "n_train": 16, "batch_size": 8}
    rows = seed_rows(0, settings, n_bootstrap=20)
    assert [row["method"] for row in rows] == methods()
    for row in rows:
        assert row["seed"] == 0 and row["seconds"] > 0
        assert all(math.isfinite(row[key]) for key in ("s_amb", "accuracy_dis")), row
        assert -1 <= row["gap"] <= 1 or math.isnan(row["gap"])
    baseline, tuned = rows[0], rows[-1]
    assert (tuned["s_amb"], tuned["gap"]) != (baseline["s_amb"], baseline["gap"])  # another training

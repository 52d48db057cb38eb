"""The retrieval table's reference levels (:func:`vlbias.experiments.retrieval_table.reference_levels`): chance, and
the highest TR R@K that repeated captions allow."""

import json
from types import SimpleNamespace

import pytest

from vlbias.experiments import retrieval_table
from vlbias.experiments.command_line import run


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


def _row(method: str, seed: int, r_mean: float) -> dict:
    recalls = dict.fromkeys(retrieval_table.RECALLS, 50.0) | {"r_mean": r_mean}
    biases = dict.fromkeys(retrieval_table.BIASES, 0.1) | {f"{key}_interval": None for key in retrieval_table.BIASES}
    return {"method": method, "seed": seed, "pretrain_s": 1, "finetune_s": 1, "measure_s": 1} | recalls | biases


def test_summary_prints_the_rows_of_out_files_and_each_seed_against_vanillas(tmp_path, capsys):
    """Seeds 0 and 1 (seed 2 is left out by --seeds): fairvlp's R mean is 2 below vanilla's on seed 0 and 1 above
    on seed 1, so the difference seed by seed is -0.5 ± 2.12 (the sample sd of -2 and +1) with the t-interval of its
    mean, lower on 1 seed."""
    rows = [_row("vanilla", 0, 50.0), _row("fairvlp", 0, 48.0), _row("vanilla", 1, 60.0), _row("fairvlp", 1, 61.0)]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(rows[:2]))
    second.write_text(json.dumps([*rows[2:], _row("vanilla", 2, 0.0), _row("fairvlp", 2, 0.0)]))
    read = run(retrieval_table.retrieval_table, ["--summary", str(first), str(second), "--seeds", "0", "1"])
    assert read == rows
    blocks = [block.splitlines() for block in capsys.readouterr().out.strip().split("\n\n")]
    tables = {" | ".join(block[0].split(" | ")[:2]): block for block in blocks}
    printed = [line.split(" | ")[:2] for line in tables["| method | seed"][2:]]
    assert printed == [["| vanilla", "0"], ["| fairvlp", "0"], ["| vanilla", "1"], ["| fairvlp", "1"]]
    header, _, paired = tables["| method − vanilla, per seed | seeds"]
    cells = dict(zip(header.split(" | "), paired.split(" | "), strict=True))
    # -0.5 ± t(0.975, 1) 2.12 / sqrt(2) = -0.5 ± 12.706 * 1.5
    assert cells["seeds"] == "2" and cells["r_mean"] == "-0.50 ± 2.12 [-19.56, +18.56], 1 lower"
    assert cells["tr_r1"] == "0.00 ± 0.00 [+0.00, +0.00], 0 lower"  # equal on both seeds


def test_summary_refuses_a_file_that_is_not_a_rows_file(tmp_path, capsys):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"method": "vanilla"}))
    with pytest.raises(SystemExit) as stopped:
        run(retrieval_table.retrieval_table, ["--summary", str(path)])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1
    assert f"Expected {path} to hold the list of run rows that --out writes, each with a method and a seed." in error

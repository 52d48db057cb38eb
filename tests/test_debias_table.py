"""The debiasing table (:mod:`vlbias.experiments.debias_table`), its fast path: per seed the quickstart CLIP and the
prompt array trained on it go to ``vlbias debias`` with BiasWorld's captions, and every row, the prompt array's
among them, is printed with its bias, accuracy and R@K columns (training and measuring replaced by stand-ins)."""

import json
from types import SimpleNamespace

import pytest

from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.experiments import debias_table


def row(method: str, seed: int, shift: float) -> dict:
    keys = [key for key, _ in [*debias_table.COLUMNS.values(), *debias_table.RECALL_COLUMNS.values()]]
    return {"method": method, **{key: shift + seed / 10 for key in keys}}


@pytest.fixture
def stand_ins(monkeypatch, tmp_path):
    trained, measured = [], []

    def fit_on_biasworld(config, strength, seed, run_dir, extra_args=()):
        trained.append({"config": config.name, "seed": seed, "strength": strength, "extra": list(extra_args)})
        save = lambda directory: (directory.mkdir(parents=True), (directory / "saved").write_text(config.name))  # noqa: E731
        world = SimpleNamespace(config={**vars(BiasWorldOptions()), "seed": seed, "bias_strength": strength})
        return SimpleNamespace(
            model=SimpleNamespace(adapter=SimpleNamespace(save_pretrained=save)),
            datamodule=SimpleNamespace(world=world),
        )

    def debias(options):
        measured.append(options)
        rows = [
            row("none", options.seed, 0.0),
            row("orth_proj", options.seed, 1.0),
            row("prompt_array", options.seed, 2.0),
        ]
        return {"comparison": [*rows, {"method": "sfid", "not_fitted": "no low-confidence samples"}]}

    monkeypatch.setattr(debias_table, "fit_on_biasworld", fit_on_biasworld)
    monkeypatch.setattr(debias_table, "debias", debias)
    return trained, measured


def test_each_seed_trains_the_clip_then_the_prompt_array_on_it_and_measures_every_row(stand_ins, tmp_path, capsys):
    trained, measured = stand_ins
    table = debias_table.debias_table(seeds=(0, 1), strength=0.9, out=str(tmp_path))
    assert [(t["config"], t["seed"]) for t in trained] == [
        ("quickstart.yaml", 0), ("debiasclip_biasworld.yaml", 0), ("quickstart.yaml", 1), ("debiasclip_biasworld.yaml", 1)
    ]  # fmt: skip
    for seed, options in zip((0, 1), measured, strict=True):
        clip = tmp_path / f"seed{seed}" / "model"
        assert (clip / "saved").read_text() == "quickstart.yaml"  # the prompt array starts from the seed's CLIP
        spec = json.loads(trained[2 * seed + 1]["extra"][1])
        assert spec["name"] == "clip" and spec["checkpoint"] == str(clip)
        prompt_array = tmp_path / f"seed{seed}" / "prompt_array" / "model"
        assert (prompt_array / "saved").read_text() == "debiasclip_biasworld.yaml"
        assert options.trained_models == {"prompt_array": {"model": "prompt_array", "checkpoint": str(prompt_array)}}
        assert options.method == "all" and options.checkpoint == str(clip) and options.captions == "biasworld"
        assert options.biasworld.seed == seed and options.biasworld.bias_strength == 0.9
    assert [entry["method"] for entry in table] == ["none", "orth_proj", "prompt_array", "sfid"]
    prompt_array = table[2]
    assert prompt_array["n_seeds"] == 2 and prompt_array["TR R@10"] == pytest.approx([2.0, 2.1])
    assert table[3]["n_seeds"] == 0 and table[3]["not_fitted"] == "no low-confidence samples"
    printed = capsys.readouterr().out
    assert "| method | MMBias d | MaxSkew@10 | gender gap | accuracy | seeds |" in printed
    assert "| method | TR R@1 | TR R@5 | TR R@10 | IR R@1 | IR R@5 | IR R@10 | seeds |" in printed
    assert printed.count("| prompt_array | +2.050 ± 0.071") == 2  # in both tables: mean of 2.0, 2.1 and its sd
    assert "| sfid (not fitted: no low-confidence samples) |" in printed

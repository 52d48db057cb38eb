"""``vlbias prune``: the run directory, the pruned checkpoint that ``vlbias measure`` reads, the CLIP export,
and one-line errors for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import CLIPModel

from vlbias.data.biasworld import BiasWorldDataset
from vlbias.models.clip import CLIPAdapter
from vlbias.models.pruned import PrunedEmbeddings
from vlbias.results import read_results

SMALL = ["--biasworld.eval_per_combination", "2"]
BASE = ["prune", "--model", "clip", "--tiny", "--data", "biasworld", *SMALL]


def assert_one_line_error(result, *fragments):
    code, _, err = result
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("vlbias: error: "), err
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture(scope="module")
def pruned_run(tmp_path_factory):
    """One ranked run on a small BiasWorld, through the console script in this process."""
    from vlbias.cli import main

    out = tmp_path_factory.mktemp("prune")
    main([*BASE, "--split", "test", "--fraction", "0.1", "--theta_quantile", "0.9", "--seed", "3", "--out", str(out)])
    return out


def test_by_default_dimensions_are_chosen_on_val_with_the_docs_settings(tmp_path, run_cli):
    """No --split, --n_dims/--fraction or Θ: 10 % of D chosen below the 0.9 MI quantile on val, so that measuring
    the pruned model on test (as the docs' recipe does) judges it on images it was not chosen on."""
    code, out, err = run_cli([*BASE, "--out", str(tmp_path)])
    assert code == 0, err
    summary = json.loads((tmp_path / "prune.json").read_text())
    assert summary["data"]["split"] == "val"
    assert (summary["n_remove"], summary["theta_quantile"]) == (6, 0.9)


def test_writes_every_output_with_the_chosen_n_marked(pruned_run):
    summary = json.loads((pruned_run / "prune.json").read_text())
    assert summary["n_remove"] == 6 and len(summary["removed"]) == 6 and summary["embedding_dim"] == 64
    assert len(summary["kept"]) == 58 and not set(summary["kept"]) & set(summary["removed"])
    assert len(summary["mutual_information"]) == 64 and summary["seed"] == 3 and summary["strategy"] == "ranked"
    assert summary["theta_quantile"] == 0.9 and summary["n_candidates"] >= 6
    # Algorithm 1 guarantees each chosen ψ_d < Ψ, not that removing the N together lowers |d|: on an untrained
    # model d can cross zero (seen: -0.103 -> +0.305)
    assert max(summary["removal_scores"]) < summary["objective_before"]
    assert summary["data"]["data"] == "biasworld" and summary["model"] == "clip"
    table = pd.read_csv(pruned_run / "tradeoff.csv")
    assert table["n_removed"].tolist() == list(range(17))  # max_dims: 25 % of 64
    chosen = table[table["chosen"]]
    assert chosen["n_removed"].tolist() == [6]
    (test,) = summary["effect_sizes_after"]
    assert chosen[f"{test}/effect_size"].item() == pytest.approx(summary["effect_sizes_after"][test])
    assert table[f"{test}/effect_size"][0] == pytest.approx(summary["effect_sizes_before"][test])
    assert chosen["zero_shot_accuracy"].item() == pytest.approx(summary["zero_shot_accuracy"]["after"])
    assert summary["tradeoff"]["order"][:6] == summary["removed"]
    assert (pruned_run / "tradeoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_measure_reads_the_pruned_checkpoint_and_sees_the_lowered_bias(pruned_run, tmp_path, run_cli):
    summary = json.loads((pruned_run / "prune.json").read_text())
    argv = ["measure", "--suite", "mmbias", "--model", "pruned", "--checkpoint", str(pruned_run / "model")]
    argv += [
        "--data",
        "biasworld",
        *SMALL,
        "--out",
        str(tmp_path),
        "--suite_options",
        "{statistics: {n_permutations: 100, n_bootstrap: 20}}",
    ]
    code, _, err = run_cli(argv)
    assert code == 0, err
    results = read_results(tmp_path / "mmbias.json")
    (test,) = summary["effect_sizes_after"]
    assert results.metrics[f"{test}/effect_size"] == pytest.approx(summary["effect_sizes_after"][test], abs=1e-4)


def test_clip_export_loads_without_vlbias_and_equals_the_pruned_checkpoint(pruned_run):
    summary = json.loads((pruned_run / "prune.json").read_text())
    model = CLIPModel.from_pretrained(pruned_run / "clip").eval()
    assert model.config.projection_dim == 64 - summary["n_remove"]
    pruned = PrunedEmbeddings.from_pretrained(pruned_run / "model").eval()
    pixels = pruned.prepare_images(torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    tokens = pruned.prepare_texts(["a person cooking.", "a photo of a man."])
    with torch.no_grad():
        out = model(pixel_values=pixels, **tokens)
        torch.testing.assert_close(out.image_embeds, pruned.embed_images(pixels), rtol=0, atol=1e-6)
        torch.testing.assert_close(out.text_embeds, pruned.embed_texts(tokens), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (["--fraction", "0.1", "--theta", "0"], ["Θ = 0 leaves no candidate dimension"]),
        (["--n_dims", "60", "--theta", "10"], ["Expected N = 60", "candidates"]),
        (["--n_dims", "3", "--fraction", "0.1", "--theta", "1"], ["Give one of `n_dims` (N) and `fraction`"]),
        (["--fraction", "0.1", "--strategy", "clip_clip", "--theta", "1"], ["'clip_clip' takes no Θ", "`theta`"]),
        (["--fraction", "0.1", "--strategy", "best", "--theta", "1"], ["`--strategy` to be one of", "got best"]),
    ],
    ids=["theta_no_candidate", "n_over_candidates", "n_and_fraction", "clip_clip_theta", "strategy"],
)
def test_bad_options_end_in_one_line(options, fragments, tmp_path, run_cli):
    assert_one_line_error(run_cli([*BASE, *options, "--out", str(tmp_path)]), *fragments)


def test_a_model_without_embed_is_refused_by_name(tmp_path, run_cli):
    argv = ["prune", "--model", "bert", "--tiny", *SMALL, "--fraction", "0.1", "--theta", "1", "--out", str(tmp_path)]
    assert_one_line_error(run_cli(argv), "'bert' lacks", "'embed'")


def test_labels_of_one_class_are_refused(tmp_path, run_cli, monkeypatch):
    item = BiasWorldDataset.__getitem__
    monkeypatch.setattr(BiasWorldDataset, "__getitem__", lambda self, i: {**item(self, i), "activity": 2})
    result = run_cli([*BASE, "--fraction", "0.1", "--theta", "1", "--out", str(tmp_path)])
    assert_one_line_error(result, "at least 2 classes", "[2]")


def test_nan_embeddings_are_refused(tmp_path, run_cli, monkeypatch):
    monkeypatch.setattr(
        CLIPAdapter, "embed_images", lambda self, pixels: torch.full((pixels.shape[0], 64), float("nan"))
    )
    result = run_cli([*BASE, "--fraction", "0.1", "--theta", "1", "--out", str(tmp_path)])
    assert_one_line_error(result, "24 of 24 image embeddings hold NaN", "'clip'")


def test_the_experiment_config_runs_through_lightning_predict(tmp_path):
    """``vlbias predict --config configs/experiment/prune_biasworld.yaml`` writes the same run directory."""
    config = Path(__file__).resolve().parents[2] / "configs" / "experiment" / "prune_biasworld.yaml"
    argv = ["predict", "--config", str(config), "--data.init_args.eval_per_combination", "2"]
    argv += ["--model.init_args.out", str(tmp_path / "run"), "--trainer.default_root_dir", str(tmp_path)]
    done = subprocess.run([sys.executable, "-m", "vlbias.cli", *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "prune.json").read_text())
    assert summary["n_remove"] == 6 and summary["n_images"] == 24
    assert {"model", "clip", "tradeoff.csv", "tradeoff.png"} <= {p.name for p in (tmp_path / "run").iterdir()}

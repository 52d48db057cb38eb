"""``vlbias prune``: the run directory, the pruned checkpoint that ``vlbias measure`` reads, the CLIP and open_clip
exports, and one-line errors for bad input."""

import json
import logging
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from transformers import CLIPModel

from vlbias.data.biasworld import BiasWorldDataset
from vlbias.mitigation.outputs import PRUNE_FOLDER, SELECTION_FILE, selection_overlap
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.families.open_clip import OpenCLIPAdapter
from vlbias.models.families.pruned import PrunedEmbeddings
from vlbias.modules.model_spec import ModelSpec
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


def test_measure_reads_the_pruned_checkpoint_and_sees_the_lowered_bias(pruned_run, tmp_path, run_cli, caplog):
    """... and warns that it measures on the split the dimensions were chosen on (the fixture chose on test)."""
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
    with caplog.at_level(logging.WARNING):
        code, _, err = run_cli(argv)
    assert code == 0, err
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [
        f"warning: Model {str(pruned_run / 'model')!r} was pruned on BiasWorld's 'test' split (seed 0), the split it "
        "is measured on now: its dimensions were chosen to lower this very bias, so the number overstates the "
        "effect; measure it on other data (prune chooses on 'val', measure on 'test')."
    ]
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


#: Loads ``<run>/open_clip`` with open_clip alone and writes its embeddings, pair logits and preprocessing of the
#: inputs in ``<inputs>.pt`` to ``<outputs>.pt``.
OPEN_CLIP_READER = textwrap.dedent(
    """
    import sys
    import open_clip, torch
    from PIL import Image

    folder, inputs, outputs, image = sys.argv[1:]
    model, preprocess = open_clip.create_model_from_pretrained("local-dir:" + folder)
    tokenize = open_clip.get_tokenizer("local-dir:" + folder)
    given = torch.load(inputs)
    with torch.no_grad():
        images = model.encode_image(given["pixels"], normalize=True)
        texts = model.encode_text(given["input_ids"], normalize=True)
        logits = model.get_logits(given["pixels"], given["input_ids"])[0].diagonal()
    torch.save({
        "images": images, "texts": texts, "logits": logits, "input_ids": tokenize(given["texts"]),
        "pixels": preprocess(Image.open(image))[None], "logit_scale": model.logit_scale.detach(),
        "embed_dim": model.text_projection.shape[1], "vlbias_imported": any(m.startswith("vlbias") for m in sys.modules),
    }, outputs)
    """
)


def test_open_clip_export_loads_in_open_clip_alone_and_equals_the_pruned_checkpoint(tmp_path, run_cli):
    """``<out>/open_clip`` of a tiny open_clip model: open_clip, in a process that never imports vlbias, reads its
    config, weights, tokenizer and preprocessing, and gives the pruned adapter's embeddings (1e-6) and pair logits
    (the logit scale carried over unchanged)."""
    out = tmp_path / "run"
    argv = ["prune", "--model", "open_clip", "--tiny", "--data", "biasworld", *SMALL, "--fraction", "0.1"]
    code, _, err = run_cli([*argv, "--out", str(out)])
    assert code == 0, err
    summary = json.loads((out / "prune.json").read_text())
    assert {p.name for p in out.iterdir()} == {"model", "open_clip", "prune.json", "tradeoff.csv", "tradeoff.png"}
    assert "create_model_from_pretrained('local-dir:<this folder>')" in (out / "open_clip" / "README.md").read_text()
    pruned = PrunedEmbeddings.from_pretrained(out / "model").eval()
    image = tmp_path / "image.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8)).save(image)
    texts = ["a person cooking.", "a photo of a man."]
    pixels = pruned.prepare_images(torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    tokens = pruned.prepare_texts(texts)
    torch.save({"pixels": pixels, "input_ids": tokens["input_ids"], "texts": texts}, tmp_path / "inputs.pt")
    command = [sys.executable, "-c", OPEN_CLIP_READER, str(out / "open_clip"), str(tmp_path / "inputs.pt")]
    done = subprocess.run([*command, str(tmp_path / "outputs.pt"), str(image)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    read = torch.load(tmp_path / "outputs.pt")
    assert not read["vlbias_imported"] and read["embed_dim"] == 32 - summary["n_remove"] == len(summary["kept"])
    with torch.no_grad():
        torch.testing.assert_close(read["images"], pruned.embed_images(pixels), rtol=0, atol=1e-6)
        torch.testing.assert_close(read["texts"], pruned.embed_texts(tokens), rtol=0, atol=1e-6)
        inner: OpenCLIPAdapter = pruned.inner
        cosines = (pruned.embed_images(pixels) * pruned.embed_texts(tokens)).sum(-1)
        torch.testing.assert_close(read["logits"], inner.model.logit_scale.exp() * cosines, rtol=0, atol=1e-5)
    assert torch.equal(read["logit_scale"], inner.model.logit_scale.detach())
    assert torch.equal(read["input_ids"], tokens["input_ids"])
    torch.testing.assert_close(read["pixels"], pruned.prepare_images([image]), rtol=0, atol=1e-6)


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


@pytest.mark.slow  # a predict in a new Python: ~13 s on 2 cores
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


def test_an_out_folder_that_is_the_trainers_root_is_refused_before_any_image_is_embedded(
    tmp_path, run_cli, monkeypatch
):
    """The trainer's root gets Lightning's config.yaml at the start: ``out`` there could never be replaced."""
    monkeypatch.setattr(CLIPAdapter, "embed_images", lambda self, pixels: pytest.fail("an image was embedded"))
    config = Path(__file__).resolve().parents[2] / "configs" / "experiment" / "prune_biasworld.yaml"
    argv = ["predict", "--config", str(config), "--data.init_args.eval_per_combination", "2"]
    code, _, err = run_cli([*argv, "--model.init_args.out", str(tmp_path), "--trainer.default_root_dir", str(tmp_path)])
    assert code == 2 and err.count("\n") == 1, err
    assert "holds what vlbias prune does not write (config.yaml)" in err


def test_n_over_d_is_refused_before_any_image_is_embedded(tmp_path, run_cli, monkeypatch):
    monkeypatch.setattr(CLIPAdapter, "embed_images", lambda self, pixels: pytest.fail("an image was embedded"))
    code, out, err = run_cli([*BASE, "--n_dims", "100", "--out", str(tmp_path / "out")])
    assert (code, out) == (2, "")
    assert err == "vlbias: error: Expected `n_dims` to give a count in [1, 63] for D = 64 but got 100 (100)\n"
    assert not (tmp_path / "out").exists()


def test_an_out_folder_that_is_not_an_earlier_prune_is_refused_before_the_model_loads(tmp_path, run_cli, monkeypatch):
    (tmp_path / "tradeoff.csv").write_text("mine")
    monkeypatch.setattr(ModelSpec, "load", lambda *args: pytest.fail("the model was loaded"))
    code, out, err = run_cli([*BASE, "--out", str(tmp_path)])
    assert (code, out) == (2, "")
    assert err == (
        f"vlbias: error: Output folder {str(tmp_path)!r} holds what vlbias prune does not write (no prune.json): give "
        "a new or empty folder (vlbias prune replaces a folder only when it is an earlier output of it).\n"
    )
    assert (tmp_path / "tradeoff.csv").read_text() == "mine"


def test_a_removal_that_raises_the_bias_is_written_with_a_warning_and_recorded(tmp_path, run_cli, caplog):
    """On the tiny CLIP, 16 dimensions chosen on val take d from about -0.01 to +0.16: |d| raised, its sign flipped."""
    with caplog.at_level(logging.WARNING):
        code, _, err = run_cli([*BASE, "--n_dims", "16", "--out", str(tmp_path)])
    assert code == 0, err
    summary = json.loads((tmp_path / "prune.json").read_text())
    ((test, before),) = summary["effect_sizes_before"].items()
    after = summary["effect_sizes_after"][test]
    assert summary["worsened"] == [
        {
            "test": test,
            "effect_size_before": before,
            "effect_size_after": after,
            "abs_raised": True,
            "sign_flipped": True,
        }
    ]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [
        f"warning: test {test!r}: removing the 16 dimensions raises |d| and flips its sign: d {before:+.3f} -> "
        f"{after:+.3f} (recorded in prune.json under `worsened`; tradeoff.png shows the bias at other N)"
    ]
    assert (tmp_path / "model" / "pruned_embeddings.json").is_file()  # written as asked


def test_the_pruned_model_records_the_data_it_was_chosen_on(pruned_run):
    assert json.loads((pruned_run / "model" / SELECTION_FILE).read_text()) == {
        "data": "biasworld",
        "split": "test",
        "seed": 0,
    }
    assert json.loads((pruned_run / "prune.json").read_text())["worsened"] == []
    assert selection_overlap(pruned_run / "model", "biasworld", "val", 0) is None
    assert selection_overlap(pruned_run / "model", "biasworld", "test", 1) is None  # another world
    assert selection_overlap(pruned_run / "model", str(pruned_run), None, 0) is None  # other data


# Rewrites the pruning folder argv[1] from its own prune.json and trade-off table, with BiasWorld's split recorded
# as argv[2], and SIGKILLs itself at the step argv[3]: "model" (model/ written, the rest not), "exchanged" (the new
# folder swapped in, the stage with the old one not yet deleted) or "rename1" (the two-rename fallback, between
# its renames: the old folder moved aside, the new one not yet in place).
REWRITER = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    import pandas as pd
    import vlbias.atomic as atomic
    from vlbias.mitigation.outputs import write_pruning_outputs
    from vlbias.models.families.pruned import PrunedEmbeddings
    from vlbias.models.registry import load

    out, split, kill_at = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    summary = json.loads((out / "prune.json").read_text())
    summary["data"]["split"] = split
    rows = pd.read_csv(out / "tradeoff.csv").drop(columns="chosen").to_dict("records")
    save, replace = PrunedEmbeddings.save_pretrained, os.replace

    def save_then_die(self, folder):
        save(self, folder)
        if kill_at == "model":
            os.kill(os.getpid(), signal.SIGKILL)

    def exchange(first, second):
        if kill_at == "rename1":
            return False
        atomic.ctypes.CDLL(None).renameat2(-100, os.fsencode(first), -100, os.fsencode(second), 2)
        os.kill(os.getpid(), signal.SIGKILL)

    def replace_then_die(source, target):
        replace(source, target)
        os.kill(os.getpid(), signal.SIGKILL)

    PrunedEmbeddings.save_pretrained, atomic._exchange, atomic.os.replace = save_then_die, exchange, replace_then_die
    write_pruning_outputs(out, load("clip", tiny=True), summary, rows, summary["n_remove"])
    """
)


@pytest.mark.parametrize(
    ("kill_at", "after"),
    [
        pytest.param("model", "test", marks=pytest.mark.slow),
        ("exchanged", "new"),
        pytest.param("rename1", "test", marks=pytest.mark.slow),
    ],
)
def test_a_prune_killed_while_replacing_its_folder_leaves_the_old_run_or_the_new_one_whole(
    pruned_run, tmp_path, kill_at, after
):
    """The folder afterwards (tidied by the next run's check) is one run: ``prune.json`` and ``model/`` record the
    same split, every output is there, and nothing of the killed write is left beside it."""
    out = tmp_path / "out"
    shutil.copytree(pruned_run, out)
    names = sorted(p.name for p in out.iterdir())
    done = subprocess.run(
        [sys.executable, "-c", REWRITER, str(out), "new", kill_at], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr
    PRUNE_FOLDER.check(out)
    assert sorted(p.name for p in out.iterdir()) == names and [p.name for p in tmp_path.iterdir()] == ["out"]
    assert json.loads((out / "prune.json").read_text())["data"]["split"] == after
    assert json.loads((out / "model" / SELECTION_FILE).read_text())["split"] == after
    model = PrunedEmbeddings.from_pretrained(out / "model")  # loads: whole
    assert model.kept_dims.tolist() == json.loads((out / "prune.json").read_text())["kept"]

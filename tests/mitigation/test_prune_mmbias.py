"""``vlbias prune --data <MMBias directory>``: Table 2's cross-modal tests on the groups that have images, the
groups as zero-shot classes, effect sizes before/after equal to the ``mmbias`` suite's functional metric
recomputed on the same embeddings, and the same selection on one and on two DDP processes."""

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from vlbias.data.images import image_problem
from vlbias.metrics.functional.weat import weat_effect_size
from vlbias.models.families.pruned import PrunedEmbeddings
from vlbias.models.registry import load

UNPLEASANT = ["cooking", "cleaning", "sewing"]  # words of the tiny models' vocabulary
PLEASANT = ["coding", "driving", "repairing"]
PHRASES = {"muslim": ["a man .", "the man ."], "christian": ["a woman .", "the woman ."], "jewish": ["a person ."]}
FOLDERS = {"muslim": "Muslim", "christian": "Christian", "jewish": "Jewish"}
COUNTS = {"muslim": 4, "christian": 4, "jewish": 5}  # 13 images: two ranks get 7 and 6
SEED = 1
OPTIONS = ["--fraction", "0.1", "--theta_quantile", "0.9", "--max_dims", "8"]


@pytest.fixture(scope="module")
def mmbias_dir(tmp_path_factory) -> Path:
    """Three religion groups of noise pictures (:data:`COUNTS`), tinted per group; ``Hindu`` has phrases only."""
    root = tmp_path_factory.mktemp("mmbias")
    phrases = {"unpleasant_phrases": UNPLEASANT, "pleasant_phrases": PLEASANT}
    (root / "textual_phrases.json").write_text(json.dumps({**phrases, "category_phrases": {**PHRASES, "Hindu": []}}))
    rng = np.random.default_rng(0)
    for tint, (group, folder) in enumerate(FOLDERS.items()):
        for index in range(COUNTS[group]):
            pixels = rng.integers(0, 160, (24, 24, 3), dtype=np.uint8)
            pixels[..., tint] += 90
            path = root / "images" / "Religion" / folder / f"{index}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels).save(path)
    return root


@pytest.fixture(scope="module")
def pruned_mmbias(mmbias_dir, tmp_path_factory):
    from vlbias.cli import main

    out = tmp_path_factory.mktemp("prune_mmbias")
    main(
        [
            "prune",
            "--model",
            "clip",
            "--tiny",
            "--seed",
            str(SEED),
            "--data",
            str(mmbias_dir),
            *OPTIONS,
            "--out",
            str(out),
        ]
    )
    return out, json.loads((out / "prune.json").read_text())


def group_embeddings(adapter, root: Path) -> dict[str, torch.Tensor]:
    """Each group's image embeddings, in float64."""
    embedded = {}
    for group, folder in FOLDERS.items():
        files = sorted((root / "images" / "Religion" / folder).iterdir())
        with torch.no_grad():
            embedded[group] = adapter.embed_images(adapter.prepare_images([str(f) for f in files])).double()
    return embedded


def text_embeddings(adapter, texts: list[str]) -> torch.Tensor:
    with torch.no_grad():
        return adapter.embed_texts(adapter.prepare_texts(texts)).double()


def test_runs_table2_tests_of_the_groups_with_images_and_records_them(pruned_mmbias):
    _, summary = pruned_mmbias
    tests = ["muslim_vs_christian/cross_modal", "jewish_vs_christian/cross_modal", "muslim_vs_jewish/cross_modal"]
    assert list(summary["effect_sizes_before"]) == tests
    assert summary["data"]["groups"] == ["christian", "jewish", "muslim"] and summary["n_images"] == 13
    assert summary["mi_labels"] == "group" and summary["n_remove"] == 6
    assert any(s["item"] == "hindu_vs_buddhist/cross_modal" for s in summary["data"]["skipped_tests"])


def test_effect_sizes_before_and_after_equal_the_suites_metric_on_the_same_embeddings(pruned_mmbias, mmbias_dir):
    out, summary = pruned_mmbias
    adapter = load("clip", tiny=True, device="cpu", options={"seed": SEED}).eval()
    images = group_embeddings(adapter, mmbias_dir)
    a, b = text_embeddings(adapter, UNPLEASANT), text_embeddings(adapter, PLEASANT)
    kept = torch.tensor(summary["kept"])
    pruned = PrunedEmbeddings.from_pretrained(out / "model").eval()
    pruned_images = group_embeddings(pruned, mmbias_dir)
    pruned_a, pruned_b = text_embeddings(pruned, UNPLEASANT), text_embeddings(pruned, PLEASANT)
    for test, before in summary["effect_sizes_before"].items():
        x, y = test.removesuffix("/cross_modal").split("_vs_")
        assert before == pytest.approx(float(weat_effect_size(images[x], images[y], a, b)), abs=1e-5)
        after = weat_effect_size(images[x][:, kept], images[y][:, kept], a[:, kept], b[:, kept])
        assert summary["effect_sizes_after"][test] == pytest.approx(float(after), abs=1e-5)
        from_checkpoint = weat_effect_size(pruned_images[x], pruned_images[y], pruned_a, pruned_b)
        assert summary["effect_sizes_after"][test] == pytest.approx(float(from_checkpoint), abs=1e-5)
    objective = np.mean(np.abs(list(summary["effect_sizes_after"].values())))
    assert summary["objective_after"] == pytest.approx(objective)
    assert max(summary["removal_scores"]) < summary["objective_before"]


def test_zero_shot_accuracy_uses_the_group_phrases_as_prompts(pruned_mmbias, mmbias_dir):
    """Accuracy before: each image's class is its nearest class vector (the normalised mean of its group's
    phrases), the classes in sorted group order."""
    _, summary = pruned_mmbias
    adapter = load("clip", tiny=True, device="cpu", options={"seed": SEED}).eval()
    images = group_embeddings(adapter, mmbias_dir)
    groups = sorted(PHRASES)
    classes = torch.stack([F.normalize(text_embeddings(adapter, PHRASES[g]).mean(0), dim=0) for g in groups])
    correct = sum(int(((images[group] @ classes.T).argmax(1) == label).sum()) for label, group in enumerate(groups))
    assert summary["zero_shot_accuracy"]["before"] == pytest.approx(correct / 13)


@pytest.mark.slow  # two launches, one of two processes: ~40 s on 2 cores
def test_the_same_selection_on_one_and_two_processes(mmbias_dir, tmp_path):
    """``--devices 2`` (CPU DDP, gloo): each rank embeds its share of the 13 images (7 and 6, interleaved), the
    rows are gathered and both ranks select; rank 0's ``prune.json`` equals the one-process run's. One image a
    batch, so that each image's embedding is bit for bit the same in both runs: the kNN MI estimator on 13
    images moves by up to 0.2 nats under the 1e-7 differences that another batch composition gives."""
    summaries = []
    for devices in (1, 2):
        out = tmp_path / f"devices{devices}"
        argv = ["prune", "--model", "clip", "--tiny", "--seed", str(SEED), "--data", str(mmbias_dir), *OPTIONS]
        argv += ["--strategy", "greedy", "--batch_size", "1", "--devices", str(devices), "--out", str(out)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "vlbias.cli", *argv], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        summaries.append(json.loads((out / "prune.json").read_text()))
    one, two = summaries
    assert two["n_images"] == one["n_images"] == 13
    assert two["removed"] == one["removed"] and two["tradeoff"]["order"] == one["tradeoff"]["order"]
    assert two["removal_scores"] == pytest.approx(one["removal_scores"], abs=1e-9)
    assert two["mutual_information"] == pytest.approx(one["mutual_information"], abs=1e-9)
    for key in ("effect_sizes_before", "effect_sizes_after"):
        assert two[key] == pytest.approx(one[key], abs=1e-9), key
    assert two["zero_shot_accuracy"] == one["zero_shot_accuracy"]


def test_an_unreadable_group_image_is_dropped_by_name(mmbias_dir, tmp_path, run_cli, caplog):
    """A truncated JPEG among Muslim's images: the selection runs on the 13 good ones, and the dropped file is named
    on the console and in ``prune.json`` (``data.dropped_images``) with its reason."""
    data = tmp_path / "mmbias"
    shutil.copytree(mmbias_dir, data)
    cut = data / "images" / "Religion" / "Muslim" / "cut.jpg"
    whole = (data / "images" / "Religion" / "Muslim" / "0.jpg").read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])
    argv = ["prune", "--model", "clip", "--tiny", "--seed", str(SEED), "--data", str(data), *OPTIONS]
    with caplog.at_level(logging.WARNING):
        code, _, err = run_cli([*argv, "--out", str(tmp_path / "out")])
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "prune.json").read_text())
    (dropped,) = summary["data"]["dropped_images"]
    assert dropped == {"item": str(cut), "reason": image_problem(cut)} and "Truncated" in dropped["reason"]
    assert summary["n_images"] == 13
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert f"warning: 1 image(s) dropped, unreadable: {cut} ({dropped['reason']})" in warnings

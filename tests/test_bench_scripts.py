"""The benchmarks run end to end on tiny inputs (smoke tests: their timings are not checked; the agreement they
print between the implementations they compare is, and so is which rows they say compare different work)."""

import json
import re
import weakref

import pytest
import torch

from vlbias.experiments.bench.answer import bench_answer
from vlbias.experiments.bench.bca_memory import bench_bca_memory
from vlbias.experiments.bench.counterbias import bench_counterbias
from vlbias.experiments.bench.fairvlp import bench_fairvlp
from vlbias.experiments.bench.models import bench_models
from vlbias.experiments.bench.pair_fusion import bench_pair_fusion
from vlbias.experiments.bench.refusal import HELP, bench_refusal
from vlbias.experiments.bench.shared_rows import bench_shared_rows
from vlbias.experiments.bench.throughput import bench_throughput
from vlbias.experiments.bench.throughput_mfu import counted_flops, mfu, peak_flops
from vlbias.experiments.command_line import run


def test_bench_counterbias_agrees_with_the_per_image_loop(capsys):
    threads = str(torch.get_num_threads())  # leave this process's thread count alone
    run(
        bench_counterbias,
        ["--model", "albef", "--n_images", "4", "--batch_size", "2", "--repeats", "1", "--threads", threads],
    )
    out = capsys.readouterr().out
    assert "vlbias batched (2)" in out and "per-image loop" in out
    (diff,) = re.findall(r"batched - loop\| = (\S+) over 16 pairs", out)
    assert float(diff) < 1e-5
    (cold, warm) = re.findall(r"speed-up: cold (\S+)x, warm (\S+)x \(median of per-pair ratios\)", out)[0]
    assert float(cold) > 0 and float(warm) > 0
    (setup, batches, statistics, same_work) = re.findall(
        r"setup (\S+), batches (\S+), statistics (\S+); without statistics \(the loop's work\): warm (\S+)x", out
    )[0]
    assert float(setup) > 0 and float(batches) > 0 and float(statistics) > 0 and float(same_work) >= float(warm)


def test_bench_models_labels_direct_calls_that_do_more_work(capsys):
    """FLAVA's documented pre-training call runs every head where the adapter runs one, and ViLT's library
    embedding loops over the images: those rows are labelled; BERT's direct call is the adapter's own work."""
    threads = str(torch.get_num_threads())
    arguments = ["--models", "bert", "flava", "vilt", "--batch_size", "2", "--repeats", "2", "--warmup", "1"]
    assert run(bench_models, [*arguments, "--threads", threads, "--json"]) == 0
    rows = {(row["model"], row["capability"]): row for row in json.loads(capsys.readouterr().out)}
    assert not rows["bert", "fill_mask"]["more_direct_work"]
    assert rows["bert", "fill_mask"]["direct_flops_ratio"] == 1.0
    assert rows["flava", "fill_mask"]["more_direct_work"] and rows["flava", "fill_mask"]["direct_flops_ratio"] > 1.3
    assert rows["vilt", "fill_mask"]["more_direct_work"] and rows["vilt", "fill_mask"]["direct_operators_ratio"] > 1.1
    assert all(row["overhead"] > -1 for row in rows.values())


def test_bench_shared_rows_variants_agree(capsys):
    threads = str(torch.get_num_threads())
    arguments = [
        "--images",
        "3",
        "--rows_per_image",
        "2",
        "--texts",
        "2",
        "--length",
        "6",
        "--repeats",
        "1",
        "--threads",
        threads,
    ]
    run(bench_shared_rows, arguments)
    out = capsys.readouterr().out
    names = "per-row K/V, head everywhere|per-row K/V, head at masks|shared K/V, head at masks|shared K/V, last layer at masks"
    rows = re.findall(rf"^({names}) .* (\S+)$", out, re.MULTILINE)
    assert len(rows) == 4
    assert all(float(diff) < 1e-4 for _, diff in rows)


@pytest.mark.slow
def test_bench_bca_memory_prints_a_row_per_size(capfd):
    run(bench_bca_memory, ["--sizes", "10", "30", "--n_bootstrap", "50"])
    rows = [line for line in capfd.readouterr().out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split("|")[1].strip() for row in rows] == ["10", "30"]
    imports, peak = (float(cell.replace(",", "")) for cell in rows[1].split("|")[2:4])
    assert 0 < imports <= peak


def test_bench_pair_fusion_refuses_no_fusion_layers(capsys):
    with pytest.raises(SystemExit) as stopped:
        run(bench_pair_fusion, ["--fusion_layers", "0"])
    assert stopped.value.code == 2
    assert "--fusion_layers must be at least 1 (the fusion layers are what is timed), not 0" in capsys.readouterr().err


def test_bench_fairvlp_cycles_batches_so_cached_attacks_as_often_as_in_training(capsys):
    """Two batches an epoch, 8 timed steps: the config's cached policy (k 128 at 32 steps an epoch: 4 epochs) runs
    with k 8 here, so the timed steps 2-9 attack at steps 8 and 9 alone, a quarter of them, as every_n_steps(4)
    does (steps 4 and 8); every_step attacks every image of every step."""
    threads = str(torch.get_num_threads())
    rows = run(bench_fairvlp, ["--steps", "8", "--epoch_batches", "2", "--batch_size", "4", "--threads", threads])
    attacked = {row["method"]: row["attacked"] for row in rows}
    assert attacked["fairvlp [cached(k=128, 8 here)]"] == 0.25
    assert attacked["fairvlp [every_n_steps(k=4)]"] == 0.25
    assert attacked["fairvlp [every_step(k=1)]"] == 1.0
    assert attacked["vanilla"] == attacked["fairvlp_l"] == 0.0
    assert "| fairvlp_v [cached(k=128, 8 here)] |" in capsys.readouterr().out  # the config's policy


def test_bench_fairvlp_base_size_names_a_tokenizer_directory_without_a_vocabulary(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        run(bench_fairvlp, ["--size", "base", "--tokenizer", str(tmp_path)])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert f"error: --tokenizer: no WordPiece tokenizer directory (with a vocab.txt) at {tmp_path}." in error


def test_bench_debias_times_every_registered_method_against_the_baseline(capsys):
    from vlbias.experiments.bench.debias import BASELINE, bench_debias, random_fit_data
    from vlbias.mitigation.registry import list_debiasers

    threads = str(torch.get_num_threads())
    run(bench_debias, ["--n", "64", "--dims", "64", "--repeats", "1", "--threads", threads])  # D >= SFID's k = 50
    out = capsys.readouterr().out
    assert "n = 64 cached embeddings, D = 64, median of 1" in out
    baseline = float(re.search(rf"{re.escape(BASELINE)}\s+(\S+)\s+1\.0", out).group(1))
    assert baseline > 0
    for method in list_debiasers():
        fit, fit_ratio, transform, _ = re.search(rf"^{method}\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", out, re.M).groups()
        assert float(fit) > 0 and float(transform) > 0
        assert float(fit_ratio) == pytest.approx(float(fit) / baseline, rel=0.05, abs=1e-3)
    data = random_fit_data(64, 16)  # the planted attribute: the two groups' mean images differ along one direction
    images, labels = data.labelled_references()
    first = torch.tensor([label == "a" for label in labels])
    assert float((images[first].mean(0) - images[~first].mean(0)).norm()) > 0.3
    assert data.missing(("reference_images", "attribute_prompts", "prompt_pairs", "concept_prompts",
                         "helpful_pairs", "encode_text", "attribute_words")) == []  # fmt: skip


@pytest.fixture(scope="module")
def synthetic_coco(tmp_path_factory):
    from vlbias.experiments.make_synthetic_coco import make_synthetic_coco

    return make_synthetic_coco(str(tmp_path_factory.mktemp("coco") / "corpus"), n_images=25, quality=50)


def test_bench_dataloader_prints_a_row_per_worker_count_and_the_workers_a_gpu_step_needs(synthetic_coco, capsys):
    from vlbias.experiments.bench.dataloader import bench_dataloader

    arguments = ["--annotations", str(synthetic_coco), "--workers", "0", "--batches", "1", "--batch_size", "2"]
    rates = run(bench_dataloader, [*arguments, "--memory", "false", "--gpu_samples_per_s", "100000"])
    out = capsys.readouterr().out
    loader_ms, raw_ms = (
        float(ms) for ms in re.search(r"loader (\S+) ms, raw PIL decode of the same 2 files (\S+) ms", out).groups()
    )
    assert loader_ms > raw_ms > 0  # the loader decodes the same files, then resizes and collates
    (row,) = re.findall(r"^\| 0 \| (\S+) \| (\S+) \| (\S+) \| (\S+) \|$", out, re.M)
    samples, raw, ratio, _ = (float(cell.replace(",", "")) for cell in row)
    assert samples == pytest.approx(rates[0], abs=0.06) and ratio == pytest.approx(samples / raw, abs=0.01)
    needed = int(re.search(r"GPU step 100,000.0 samples/s: (\d+) workers keep up \(at one core each", out).group(1))
    assert needed == pytest.approx(100 * loader_ms, abs=2)  # ceil(100,000/s x loader ms), ms rounded in print


def test_bench_dataloader_measures_memory_after_reading_and_iterating(synthetic_coco, tmp_path, capsys):
    from vlbias.experiments.bench.dataloader import half_corpus, measure_memory

    half = half_corpus(synthetic_coco, tmp_path)
    assert len(json.loads(half.read_text())["images"]) == 13  # every other of 25
    measure_memory(str(synthetic_coco), str(synthetic_coco.parent / "images"), 16, 2, 1, str(tmp_path / "cache"))
    measured = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert measured["images"] == 13  # train 1 + val 12
    assert all(measured[at]["RssAnon"] > 0 and measured[at]["RssFile"] > 0 for at in ("imports", "read", "iterated"))


def test_bench_dataloader_refuses_more_batches_than_the_split_has(synthetic_coco, capsys):
    from vlbias.experiments.bench.dataloader import bench_dataloader

    with pytest.raises(SystemExit) as stopped:
        run(bench_dataloader, ["--annotations", str(synthetic_coco), "--workers", "0", "--batches", "3"])
    assert stopped.value.code == 2
    assert "has 1 batches of 32; --batches 3 needs 4 (one to start the workers)" in capsys.readouterr().err


@pytest.mark.parametrize("switches", [(), ("--channels_last", "--gradient_checkpointing")], ids=["plain", "switched"])
def test_bench_throughput_sides_start_from_the_same_weights_and_do_the_same_arithmetic(switches, capsys, monkeypatch):
    """Tiny CLIP: vlbias's retrieval module, the raw step and open_clip's own step agree on the first loss and on the
    FLOPs of a step (vlbias's ITC and open_clip's ClipLoss compute the text-to-image similarities as a second
    product, where the raw step transposes the first: one (B, D) x (D, B) product more, forward and backward); on the
    CPU there is no peak, so no MFU. With channels-last and gradient checkpointing on every side, the same (the FLOPs
    counted without the recomputation). The counted step's optimizer is gone before the timed steps start (its state
    would count in their memory)."""
    from vlbias.experiments.bench import throughput

    fit, optimizers, alive = throughput._fit, [], []

    def tracked_fit(module, *arguments, **options):
        alive.append([optimizer() is not None for optimizer in optimizers])
        clock = fit(module, *arguments, **options)
        optimizers.append(weakref.ref(module.trainer.optimizers[0]))
        return clock

    monkeypatch.setattr(throughput, "_fit", tracked_fit)
    threads = str(torch.get_num_threads())
    arguments = ["--workloads", "clip", "--batch_sizes", "2", "--steps", "1", "--warmup", "0", "--precisions", "fp32"]
    rows = run(bench_throughput, [*arguments, "--threads", threads, *switches])
    assert alive == [[], [False]]  # the counted fit, then the timed one
    sides = {row["side"]: row for row in rows}
    assert list(sides) == ["vlbias", "raw", "open_clip"]
    raw = sides["raw"]
    for row in sides.values():
        assert row["first_loss"] == pytest.approx(raw["first_loss"], abs=1e-5)
        extra = 0 if row["side"] == "raw" else 3 * 2 * 2 * 2 * 32  # B = 2, D = 32
        assert row["flops"] == raw["flops"] + extra and row["flops_x_raw"] == pytest.approx(1.0, abs=1e-3)
        assert row["x_raw"] == pytest.approx(row["seconds"] / raw["seconds"])
        assert row["samples_per_s"] == pytest.approx(2 / row["seconds"]) and row["mfu"] is None
    out = capsys.readouterr().out
    assert "| clip tiny | 2 | fp32 | vlbias |" in out
    assert f"options: {', '.join(switch[2:] for switch in switches) or 'none'}" in out


def test_flops_of_a_linear_layer_forward_and_backward_are_the_hand_count():
    """y = x W^T + b, x (B, I), W (O, I): the forward's product is 2 B I O FLOPs, and the backward computes two of
    the same size (dL/dx = dL/dy W, dL/dW = dL/dy^T x); the bias adds none that FlopCounterMode counts."""
    batch, inputs, outputs = 5, 3, 7
    layer = torch.nn.Linear(inputs, outputs)
    x = torch.randn(batch, inputs, requires_grad=True)
    assert counted_flops(lambda: layer(x)) == 2 * batch * inputs * outputs
    assert counted_flops(lambda: layer(x).sum().backward()) == 3 * 2 * batch * inputs * outputs
    assert mfu(3 * 2 * batch * inputs * outputs, 1e-6, peak_flops("cpu", "bf16")) is None  # no peak on a CPU


@pytest.mark.parametrize("bench", [bench_throughput, bench_fairvlp, bench_models], ids=lambda bench: bench.__name__)
def test_a_bench_refuses_a_device_the_machine_lacks_in_one_line(bench, capsys):
    with pytest.raises(SystemExit) as stopped:
        run(bench, ["--device", "cuda:99"])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1
    assert "Expected `device` to be one of this machine's devices ['cpu'" in error and "but got 'cuda:99'." in error


def test_bench_throughput_refuses_a_batch_without_negatives(capsys):
    with pytest.raises(SystemExit) as stopped:
        run(bench_throughput, ["--batch_sizes", "4", "1"])
    assert stopped.value.code == 2
    assert "Expected batch sizes >= 2 (a contrastive batch needs negatives) but got [4, 1]." in capsys.readouterr().err


def test_bench_throughput_refuses_fused_adamw_on_the_cpu(capsys):
    with pytest.raises(SystemExit) as stopped:
        run(bench_throughput, ["--fused_adamw", "--device", "cpu"])
    assert stopped.value.code == 2
    assert "--fused_adamw needs a CUDA device (AdamW's fused kernel), not cpu." in capsys.readouterr().err


def test_bench_throughput_leaves_lightnings_log_levels_as_they_were():
    import logging

    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    before = [logger.level for logger in loggers]
    arguments = ["--workloads", "embed", "--batch_sizes", "2", "--steps", "1", "--warmup", "0"]
    run(bench_throughput, [*arguments, "--threads", str(torch.get_num_threads())])
    assert [logger.level for logger in loggers] == before


def test_bench_sfid_trees_compares_each_forest_with_the_default(capsys):
    from vlbias.experiments.bench.sfid_trees import bench_sfid_trees

    run(bench_sfid_trees, ["--n", "120", "--dims", "64", "--trees", "5", "--clock", "wall"])  # D >= SFID's k = 50
    rows = re.findall(r"^(.+?)\s+(\S+)\s+(\d+)/(\d+)\s+(\S+)$", capsys.readouterr().out, re.M)
    assert [row[0] for row in rows] == ["100 trees (default)", "100 trees, seed 1", "5 trees"]
    assert rows[0][2:4] == ("50", "50") and all(float(row[1]) > 0 and int(row[2]) <= 50 for row in rows)
    assert all(-1 < float(row[4]) <= 1 for row in rows)


def test_bench_refusal_prints_a_row_per_command_line_with_its_times(capsys):
    times = bench_refusal(repeats=1)
    assert {name: len(seconds) for name, seconds in times.items()} == dict.fromkeys(times, 1)
    table = capsys.readouterr().out
    assert f"| `{HELP}` |" in table and table.count("\n| `vlbias") == 3


def test_bench_answer_counts_the_shared_prompt_cache_cutting_the_flops_of_four_options(capsys):
    """At a 256-token prompt, scoring 4 options over the shared prompt cache costs under 1/2.5 of the FLOPs of one
    full forward per option (counted by FlopCounterMode, so the same on any machine), with the same scores."""
    bench_answer(prompt_tokens=256, options=4, batch_size=2, repeats=1)
    table = capsys.readouterr().out
    cached = next(line for line in table.splitlines() if line.startswith("vlbias score_options"))
    assert float(cached.split()[-1]) >= 2.5, table
    difference = float(table.split("max |cached - naive log-probability| = ")[1].split(";")[0])
    assert difference < 1e-5, table

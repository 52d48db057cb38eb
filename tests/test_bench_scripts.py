"""The CounterBias benchmarks run end to end on tiny inputs (smoke tests: their timings are not
checked, the agreement they print between the implementations they compare is)."""

import importlib.util
import re
from pathlib import Path

import torch

SCRIPTS = Path(__file__).parents[1] / "scripts"


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_counterbias_agrees_with_the_per_image_loop(capsys):
    threads = str(torch.get_num_threads())  # leave this process's thread count alone
    script("bench_counterbias").main(
        ["--model", "albef", "--n_images", "4", "--batch_size", "2", "--repeats", "1", "--threads", threads]
    )
    out = capsys.readouterr().out
    assert "vlbias batched (2)" in out and "per-image loop" in out
    (diff,) = re.findall(r"batched - loop\| = (\S+) over 16 pairs", out)
    assert float(diff) < 1e-5


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
    script("bench_shared_rows").main(arguments)
    out = capsys.readouterr().out
    names = "per-row K/V, head everywhere|per-row K/V, head at masks|shared K/V, head at masks|shared K/V, last layer at masks"
    rows = re.findall(rf"^({names}) .* (\S+)$", out, re.MULTILINE)
    assert len(rows) == 4
    assert all(float(diff) < 1e-4 for _, diff in rows)

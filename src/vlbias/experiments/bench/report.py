"""Wall time of ``vlbias report`` (:func:`vlbias.report.build_report`) over many results files
(``scripts/bench_report.py``).

Writes ``files`` results files with :func:`vlbias.results.write_results` into a temporary folder, one folder
each, each an association suite's output as the measurement suites write it: ``tests`` tests (metrics with
intervals and raw/Holm/BH p-values, an item table of ``x``/``y``/``a``/``b``/effect size, so one heatmap per
file) and ``skipped`` skipped items; then times ``build_report`` over the folder ``repeats`` times and prints
the median wall and CPU seconds (CPU time is what an idle core would take: on a loaded machine the wall time is
longer), the figures and tables written, and the CPU.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from jsonargparse.typing import NonNegativeInt, PositiveInt

from vlbias.experiments.bench.timing import machine
from vlbias.report import build_report
from vlbias.results import Results, write_results

GROUPS = [("men", "women"), ("young", "old"), ("european", "african"), ("christian", "muslim")]
ATTRIBUTES = [("career", "family"), ("math", "arts"), ("pleasant", "unpleasant")]


def write_files(root: Path, n_files: int, n_tests: int, n_skipped: int, seed: int = 0) -> None:
    """``n_files`` results files under ``root/run_NNN/``, with numbers drawn from ``seed``."""
    generator = np.random.default_rng(seed)
    pairs = [(x, a) for x in GROUPS for a in ATTRIBUTES][:n_tests]
    for index in range(n_files):
        sizes = generator.normal(0.0, 0.6, len(pairs))
        items = [
            {"kind": "sentence", "test": f"test{t}", "x": x, "y": y, "a": a, "b": b, "effect_size": float(size)}
            for t, (((x, y), (a, b)), size) in enumerate(zip(pairs, sizes))
        ]
        metrics = {f"test{t}/effect_size": row["effect_size"] for t, row in enumerate(items)}
        p_values = {}
        for key in metrics:
            p = float(generator.uniform())
            p_values |= {key: p, f"{key}@holm": min(1.0, p * len(metrics)), f"{key}@bh": min(1.0, p * 2)}
        results = Results(
            suite="weat",
            model="bert",
            checkpoint=None,
            config={"bench": index},
            seed=index,
            n_items=len(items),
            metrics=metrics,
            intervals={key: [value - 0.3, value + 0.3] for key, value in metrics.items()},
            p_values=p_values,
            skipped=[{"item": f"word{k}", "reason": f"reason {k % 3}"} for k in range(n_skipped)],
        )
        write_results(root / f"run_{index:03d}", results, items)


def bench_report(
    files: PositiveInt = 100, tests: PositiveInt = 6, skipped: NonNegativeInt = 10, repeats: PositiveInt = 3
) -> None:
    """Time the report over freshly written results files and print the table.

    Args:
        files: Results files to report on.
        tests: Tests per file (one heatmap cell each).
        skipped: Skipped items per file.
        repeats: Timed report builds (the median is printed).
    """
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write_files(root / "results", files, tests, skipped)
        times, cpu_times = [], []
        for repeat in range(repeats):
            start, cpu_start = time.perf_counter(), time.process_time()
            report = build_report([root / "results"], root / f"report_{repeat}")
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
        tables = report.markdown.read_text().count("\n| --- |")
    print(machine())
    print("| results files | tests each | figures | tables | wall seconds | CPU seconds | CPU seconds per file |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    wall, cpu = statistics.median(times), statistics.median(cpu_times)
    shape = f"| {files} | {tests} | {len(report.images)} | {tables}"
    print(f"{shape} | {wall:.1f} | {cpu:.1f} | {cpu / files:.3f} |")

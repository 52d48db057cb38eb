"""ALBEF masked-word scoring of rows that share images, at base width: what the fusion layers and the MLM head
cost per batch, four ways in the same run.

    python scripts/bench_shared_rows.py --threads 2

What it computes and prints: :mod:`vlbias.experiments.bench.shared_rows`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.shared_rows import bench_shared_rows
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_shared_rows)

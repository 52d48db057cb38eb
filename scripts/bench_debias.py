"""Fitting every registered training-free debiaser on 10,000 cached embeddings of dimension 512, on one CPU thread,
against a matrix multiply of the same size timed in the same run.

    python scripts/bench_debias.py [--n 10000] [--dims 512] [--threads 1] [--repeats 3] [--methods orth_proj ...]

What it computes and prints: :mod:`vlbias.experiments.bench.debias`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.debias import bench_debias
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_debias)

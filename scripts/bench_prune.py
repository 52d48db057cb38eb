"""MMBias Algorithm 1 (ranked): vlbias's closed-form leave-one-out against the per-dimension loop.

    python scripts/bench_prune.py [--dims 512] [--tests 10] [--threads 1] [--repeats 5]

What it computes and prints: :mod:`vlbias.experiments.bench.prune`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.prune import bench_prune
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_prune)

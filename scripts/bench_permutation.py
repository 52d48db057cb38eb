"""The WEAT permutation test: vlbias against a per-permutation numpy loop, on one thread, cold and warm.

    python scripts/bench_permutation.py [--loop_permutations 100000] [--repeats 5] [--cold_runs 3]

OMP/MKL/OpenBLAS are set to one thread here, before numpy and torch are imported (the cold runs' processes inherit
it).

What it computes and prints: :mod:`vlbias.experiments.bench.permutation`; ``--help`` lists the options.
"""

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"

from vlbias.experiments.bench.permutation import bench_permutation  # noqa: E402 (after the thread settings)
from vlbias.experiments.command_line import run  # noqa: E402

if __name__ == "__main__":
    run(bench_permutation)

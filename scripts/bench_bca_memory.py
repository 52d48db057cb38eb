"""Peak memory of the BCa bootstrap intervals at large set sizes (a WEAT effect-size interval and a grounded
congruence interval), each size in a fresh process.

    python scripts/bench_bca_memory.py --sizes 10 5000 20000

What it computes and prints: :mod:`vlbias.experiments.bench.bca_memory`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.bca_memory import bench_bca_memory
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_bca_memory)

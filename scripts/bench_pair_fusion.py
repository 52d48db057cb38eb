"""ALBEF ITM scores of retrieval candidate pairs at base width: the fusion layers as ALBEF's own evaluation runs
them against vlbias' pair path, same pairs, same run.

    python scripts/bench_pair_fusion.py --images 8 --captions 40 --k_test 8 --threads 1

What it computes and prints: :mod:`vlbias.experiments.bench.pair_fusion`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.pair_fusion import bench_pair_fusion
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_pair_fusion)

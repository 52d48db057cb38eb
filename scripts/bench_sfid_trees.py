"""SFID's random forest: the seconds of a fit with 100 trees (its default) and fewer, against what fewer trees change.

    python scripts/bench_sfid_trees.py [--n 10000] [--dims 512] [--trees 100 50 20 10] [--threads 1]

What it computes and prints: :mod:`vlbias.experiments.bench.sfid_trees`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.sfid_trees import bench_sfid_trees
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_sfid_trees)

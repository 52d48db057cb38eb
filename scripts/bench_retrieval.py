"""Top-k ITM re-ranking for retrieval: vlbias's batched re-ranking against the per-query loop.

    python scripts/bench_retrieval.py [--images 1000] [--captions 5000] [--k_test 128]
                                      [--threads 1] [--repeats 3] [--loop_queries N]

What it computes and prints: :mod:`vlbias.experiments.bench.retrieval`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.retrieval import bench_retrieval
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_retrieval)

"""Wall time of one BiasSuiteCallback measurement of the quickstart model on 1 and on 2 CPU processes.

    python scripts/bench_callback.py [--repeats 5] [--eval_per_combination 32]

What it computes and prints: :mod:`vlbias.experiments.bench.callback`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.callback import bench_callback
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_callback)

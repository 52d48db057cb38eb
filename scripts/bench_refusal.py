"""Wall time of refusing a misspelt suite, against a misspelt option and ``vlbias --help``, each a fresh process.

    python scripts/bench_refusal.py [--repeats 5]

What it computes and prints: :mod:`vlbias.experiments.bench.refusal`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.refusal import bench_refusal
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_refusal)

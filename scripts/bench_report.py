"""Wall time of ``vlbias report`` over many results files.

    python scripts/bench_report.py [--files 100]

What it computes and prints: :mod:`vlbias.experiments.bench.report`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.report import bench_report
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_report)

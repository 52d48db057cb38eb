"""Empirical coverage of the effect size's bootstrap intervals, percentile versus BCa (issue 22).

Run me like this (about two minutes on one core):

    OMP_NUM_THREADS=1 python scripts/bootstrap_coverage.py
    python scripts/bootstrap_coverage.py --sizes 8 12 --effect_sizes 0.5 --datasets 300 --n_bootstrap 1000

What it computes and prints: :mod:`vlbias.experiments.bootstrap_coverage`; ``--help`` lists the options.
"""

from vlbias.experiments.bootstrap_coverage import bootstrap_coverage
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bootstrap_coverage)

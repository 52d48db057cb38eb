"""Planted bias is recovered: train the quickstart model at several bias strengths and seeds
and print the MMBias cross-modal effect size measured on BiasWorld's balanced test split.

    python scripts/biasworld_sanity.py                      # strengths 0.0 0.5 0.9, seeds 0-4
    python scripts/biasworld_sanity.py --strengths 0 0.9 --seeds 0

What it computes and prints: :mod:`vlbias.experiments.planted.mmbias`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.mmbias import sanity_table

if __name__ == "__main__":
    run(sanity_table)

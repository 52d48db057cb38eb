"""Planted bias is recovered by CounterBias: train a tiny masked-LM ALBEF on BiasWorld at
several bias strengths and seeds and print the CounterBias measures of the activities,
measured on BiasWorld's balanced test split.

    python scripts/biasworld_counterbias_sanity.py                      # strengths 0.0 0.5 0.9, seeds 0-2
    python scripts/biasworld_counterbias_sanity.py --strengths 0 0.9 --seeds 0

What it computes and prints: :mod:`vlbias.experiments.planted.counterbias`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.counterbias import sanity_table

if __name__ == "__main__":
    run(sanity_table)

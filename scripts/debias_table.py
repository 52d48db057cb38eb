"""Every registered debiaser against no method on BiasWorld's planted bias: per seed, train the quickstart model
at bias strength 0.9, fit every method on the world's val split, and measure bias and accuracy on its test split;
print each method's mean over seeds with its spread and t-interval.

    python scripts/debias_table.py                   # seeds 0-4
    python scripts/debias_table.py --seeds 0 1 --out runs/debias_table

What it computes and prints: :mod:`vlbias.experiments.debias_table`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.debias_table import debias_table

if __name__ == "__main__":
    run(debias_table)

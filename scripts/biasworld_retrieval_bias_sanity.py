"""Planted bias shows in what is retrieved: train the quickstart CLIP at several bias strengths and seeds and
print the ranking bias (retrieval_bias suite) of its retrievals on BiasWorld's balanced test split.

    python scripts/biasworld_retrieval_bias_sanity.py                      # strengths 0.0 0.9, seeds 0-2
    python scripts/biasworld_retrieval_bias_sanity.py --strengths 0 0.9 --seeds 0 --epochs 6

What it computes and prints: :mod:`vlbias.experiments.planted.retrieval_bias`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.retrieval_bias import sanity_table

if __name__ == "__main__":
    run(sanity_table)

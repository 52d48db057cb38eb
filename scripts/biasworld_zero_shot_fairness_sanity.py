"""Planted bias shows in zero-shot classification: train the quickstart CLIP at several bias strengths and seeds and
print the accuracy of classifying BiasWorld's test activities, for stereotyped and counter-stereotypical images and
between men and women (zero_shot_fairness suite).

    python scripts/biasworld_zero_shot_fairness_sanity.py                      # strengths 0.0 0.9, seeds 0-2
    python scripts/biasworld_zero_shot_fairness_sanity.py --strengths 0 0.9 --seeds 0 --epochs 6

What it computes and prints: :mod:`vlbias.experiments.planted.zero_shot_fairness`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.zero_shot_fairness import sanity_table

if __name__ == "__main__":
    run(sanity_table)

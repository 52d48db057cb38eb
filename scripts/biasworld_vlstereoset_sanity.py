"""Planted bias shows in caption selection: train the quickstart model at several bias strengths
and seeds on a BiasWorld where a share of the images hide their activity object, then print
VLStereoSet's vlrs, vlbs and ivlas measured on the balanced test split.

    python scripts/biasworld_vlstereoset_sanity.py                 # strengths 0.0 0.5 0.9, seeds 0-4
    python scripts/biasworld_vlstereoset_sanity.py --strengths 0 0.9 --seeds 0 --hidden_object_rate 0.3

What it computes and prints: :mod:`vlbias.experiments.planted.vlstereoset`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.vlstereoset import sanity_table

if __name__ == "__main__":
    run(sanity_table)

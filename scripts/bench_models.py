"""Throughput of every registered adapter's capabilities, adapter vs the wrapped model called directly.

    python scripts/bench_models.py                       # tiny random models, CPU
    python scripts/bench_models.py --clock thread        # the same on a machine shared with other work
    python scripts/bench_models.py --base_size --device cuda --batch_size 64
    python scripts/bench_models.py --models clip --checkpoint clip=openai/clip-vit-base-patch32

Exit status 1 when an overhead exceeds ``--max_overhead``.

What it computes and prints: :mod:`vlbias.experiments.bench.models`; ``--help`` lists the options.
"""

import sys

from vlbias.experiments.bench.models import bench_models
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    sys.exit(run(bench_models))

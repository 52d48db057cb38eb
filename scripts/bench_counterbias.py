"""CounterBias throughput: the batched suite vs a per-image loop doing the same work, same run.

    python scripts/bench_counterbias.py --model vilt --n_images 64 --batch_size 32

What it computes and prints: :mod:`vlbias.experiments.bench.counterbias`; ``--help`` lists the options.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tiny models only: no hub

from vlbias.experiments.bench.counterbias import bench_counterbias
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_counterbias)

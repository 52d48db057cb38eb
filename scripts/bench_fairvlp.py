"""Step time of every FairVLP method against ``vanilla`` in the same run (tiny ALBEF on the CPU by default).

    python scripts/bench_fairvlp.py                       # the config's sizes, 16 timed steps per method
    python scripts/bench_fairvlp.py --steps 8 --epoch_batches 2 --batch_size 16
    python scripts/bench_fairvlp.py --size base --device cuda --precision bf16 --batch_size 32

What it computes and prints: :mod:`vlbias.experiments.bench.fairvlp`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.fairvlp import bench_fairvlp
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_fairvlp)

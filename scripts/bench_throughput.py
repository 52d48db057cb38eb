"""Training and evaluation throughput: vlbias's step against the raw model's and open_clip's, with FLOPs and MFU.

    python scripts/bench_throughput.py                     # tiny models on the CPU, every workload
    python scripts/bench_throughput.py --size base --device cuda --threads 8   # the GPU table, every workload
    python scripts/bench_throughput.py --size base --device cuda --workloads clip --fused_adamw --compile
    python scripts/bench_throughput.py --size base --device cuda --workloads albef --gradient_checkpointing

What it computes and prints: :mod:`vlbias.experiments.bench.throughput`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.throughput import bench_throughput
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_throughput)

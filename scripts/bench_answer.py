"""Scoring a chat VLM's answer options: the shared prompt cache against one full forward per option, against
``model.generate`` of one token, and the adapter against the raw forwards, with FLOPs counted.

    python scripts/bench_answer.py                                   # tiny random LLaVA, CPU
    python scripts/bench_answer.py --size base --prompt_tokens 256   # base width
    python scripts/bench_answer.py --family qwen2_vl --size base --device cuda --precision bf16

What it computes and prints: :mod:`vlbias.experiments.bench.answer`; ``--help`` lists the options.
"""

import sys

from vlbias.experiments.bench.answer import bench_answer
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    sys.exit(run(bench_answer))

"""Wall time of a refusal: how long ``vlbias`` takes, as a fresh process, to refuse a misspelt name
(``scripts/bench_refusal.py``).

Three command lines, each run ``repeats`` times as a new ``python -m vlbias.cli`` process, in rounds that alternate
their order (:func:`~vlbias.experiments.bench.timing.interleaved`): ``vlbias measure --suite mmbiass ...`` (a
misspelt suite, refused from the torch-free suite registry), ``vlbias measure --suitee mmbias ...`` (a misspelt
option, refused by the parser) and ``vlbias --help``. It prints each one's median and fastest wall seconds and
their ratio to ``vlbias --help``: a misspelt name should cost what a misspelt option costs (under 2 s on an idle
machine), not the seconds that importing torch and transformers takes.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jsonargparse.typing import PositiveInt

from vlbias.experiments.bench.timing import interleaved, machine

HELP = "vlbias --help"


def command_lines(out: Path) -> dict[str, list[str]]:
    """The command lines timed, by the name printed in the table (each refused, or answered, before any run)."""
    run = ["--model", "clip", "--tiny", "--out", str(out)]
    return {
        "vlbias measure --suite mmbiass (misspelt suite)": ["measure", "--suite", "mmbiass", *run],
        "vlbias measure --suitee mmbias (misspelt option)": ["measure", "--suitee", "mmbias", *run],
        HELP: ["--help"],
    }


def wall_seconds(argv: list[str]) -> float:
    """Wall seconds of ``python -m vlbias.cli <argv>`` as a fresh process (its exit status is not asked)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "vlbias.cli", *argv], capture_output=True, check=False)
    return time.perf_counter() - start


def bench_refusal(repeats: PositiveInt = 5) -> dict[str, list[float]]:
    """Time each command line as a fresh process and print the table; returns each one's times.

    Args:
        repeats: Runs of each command line (the median and the fastest are printed).
    """
    with tempfile.TemporaryDirectory() as folder:
        lines = command_lines(Path(folder) / "out")
        times = interleaved(lines, repeats, lambda name: wall_seconds(lines[name]))
    baseline = statistics.median(times[HELP])
    print(f"| command (fresh process, {repeats} runs) | median s | fastest s | / {HELP} |")
    print("| --- | ---: | ---: | ---: |")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"| `{name}` | {median:.2f} | {min(seconds):.2f} | {median / baseline:.2f} |")
    print(machine())
    return times

"""Peak memory of the BCa bootstrap intervals at large set sizes: a WEAT effect-size interval and a grounded
congruence interval (both ``method="bca"``) on random float64 scores, N per set, one thread
(``scripts/bench_bca_memory.py``).

Each size runs in a fresh process (peak RSS is per process); printed: the peak RSS after the imports, after the
two intervals, and the intervals' CPU seconds. BCa's acceleration leaves each item out in turn (n rows of n − 1
scores); those rows are computed in chunks (:func:`vlbias.metrics.functional.bootstrap.leave_one_out_values`), so the
intervals should add next to nothing to the imports' memory at any N.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from collections.abc import Sequence

from jsonargparse.typing import PositiveInt


def measure(n: int, n_bootstrap: int) -> None:
    """One size, in this process: prints ``| n | imports MiB | peak MiB | CPU s |``."""
    import torch

    from vlbias.metrics.functional import congruence_interval, interval_from_associations

    torch.set_num_threads(1)
    imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    generator = torch.Generator().manual_seed(0)
    x, y, x_other, y_other = (torch.randn(n, generator=generator, dtype=torch.float64) for _ in range(4))
    start = time.process_time()
    interval_from_associations(x, y, n_bootstrap=n_bootstrap, method="bca")
    congruence_interval(x, x_other, y, y_other, n_bootstrap=n_bootstrap, method="bca")
    seconds = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"| {n:,} | {imports:,.0f} | {peak:,.0f} | {seconds:.1f} |", flush=True)


def bench_bca_memory(sizes: Sequence[int] = (10, 5000, 20000), n_bootstrap: PositiveInt = 1000) -> None:
    """Print a row per set size, each measured in a fresh process (:func:`measure`).

    Args:
        sizes: Items per set N.
        n_bootstrap: Bootstrap replicates per interval.
    """
    print("| N per set | after imports MiB | peak MiB | intervals CPU s |\n|---:|---:|---:|---:|", flush=True)
    for n in sizes:
        code = f"from vlbias.experiments.bench.bca_memory import measure; measure({int(n)}, {int(n_bootstrap)})"
        subprocess.run([sys.executable, "-c", code], check=True)

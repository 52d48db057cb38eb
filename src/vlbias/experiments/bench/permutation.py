"""The WEAT permutation test: vlbias against a per-permutation numpy loop, on one thread, cold and warm
(``scripts/bench_permutation.py``).

Cases: 25, 64, 256 and 1024 items per target set, 25 against 40 and 5 against 3000 (unequal sizes), each with 100,000
re-partitions (the observed one and P = 99,999 random ones, May et al.'s estimator (1 + #>=) / (1 + P)). Both
sides start from the same association scores s(w, A, B) and do the same work:

* vlbias: ``p_value_from_associations(s_x, s_y, n_permutations=P, allow_unequal_sizes=True)``;
* the loop, as May et al.'s ``sentbias/weat.py`` does it: per re-partition, shuffle the pooled indices in place
  (``rng.shuffle``), sum the scores of the first |X| and compare with the observed sum.

Warm: one warm-up call, then the median of ``repeats`` calls, the same counts on both sides. Cold: the first
call for the case's set sizes in a fresh Python process (imports done; vlbias caches nothing across calls, so no
table survives from one case to the next), the median over ``cold_runs`` processes per side; each process
times the cases in the order given. The loop runs ``loop_permutations`` re-partitions and its time is scaled
linearly to P when that is fewer (the table says so). Threads: the script sets OMP/MKL/OpenBLAS to 1 before numpy
and torch are imported (the cold processes inherit it) and ``torch.set_num_threads(1)``. On a shared machine the
medians still move with other work: the load average is printed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import torch
from jsonargparse.typing import PositiveInt

from vlbias.experiments.bench.timing import median_seconds
from vlbias.metrics.functional import p_value_from_associations
from vlbias.runtime.environment import cpu_name
from vlbias.runtime.threads import torch_threads

PERMUTATIONS = 99_999  # + the observed partition = 100,000 re-partitions
CASES = {
    "25": (25, 25),
    "64": (64, 64),
    "256": (256, 256),
    "1024": (1024, 1024),
    "25 vs 40": (25, 40),
    "5 vs 3000": (5, 3000),
}
Case = Literal[tuple(CASES)]


def scores(n_x: int, n_y: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Association scores with a small lean of X (p-values away from 0 and 1, where sampling has work to do)."""
    generator = torch.Generator().manual_seed(n_x * 10_000 + n_y)
    s_x = 0.05 * torch.randn(n_x, generator=generator, dtype=torch.float64) + 0.004
    return s_x, 0.05 * torch.randn(n_y, generator=generator, dtype=torch.float64)


def vlbias_p(s_x: torch.Tensor, s_y: torch.Tensor, n_permutations: int) -> float:
    """vlbias's permutation p-value."""
    return p_value_from_associations(s_x, s_y, n_permutations=n_permutations, allow_unequal_sizes=True).item()


def loop_p(s_x: torch.Tensor, s_y: torch.Tensor, n_permutations: int, seed: int = 0) -> float:
    """May et al.'s loop: shuffle the pooled indices, sum the first |X| scores, compare with the observed sum."""
    pooled = np.concatenate([s_x.numpy(), s_y.numpy()])
    indices, size, observed = np.arange(pooled.size), s_x.numel(), s_x.sum().item()
    rng = np.random.default_rng(seed)
    as_extreme = 0
    for _ in range(n_permutations):
        rng.shuffle(indices)
        as_extreme += pooled[indices[:size]].sum() >= observed
    return (1 + as_extreme) / (1 + n_permutations)


def side(name: str, case: str, loop_permutations: int) -> Callable[[], float]:
    """One side's call on one case (``vlbias`` or ``loop``)."""
    s_x, s_y = scores(*CASES[case])
    if name == "vlbias":
        return lambda: vlbias_p(s_x, s_y, PERMUTATIONS)
    return lambda: loop_p(s_x, s_y, loop_permutations)


def print_cold_seconds(name: str, cases: Sequence[str], loop_permutations: int) -> None:
    """In a fresh process: the seconds of the first call of side ``name`` on each case, on one line."""
    torch.set_num_threads(1)
    seconds = []
    for case in cases:
        call = side(name, case, loop_permutations)
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    print(*seconds)


def cold(name: str, cases: Sequence[str], loop_permutations: int, runs: int) -> dict[str, float]:
    """Per case, the median over fresh processes of the time of its first call."""
    code = (
        "from vlbias.experiments.bench.permutation import print_cold_seconds; "
        f"print_cold_seconds({name!r}, {list(cases)!r}, {int(loop_permutations)})"
    )
    runs_times = [
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
        for _ in range(runs)
    ]
    return {case: statistics.median(float(times[i]) for times in runs_times) for i, case in enumerate(cases)}


def bench_permutation(
    loop_permutations: PositiveInt = PERMUTATIONS,
    repeats: PositiveInt = 5,
    cold_runs: PositiveInt = 3,
    cases: Sequence[Case] = tuple(CASES),
) -> None:
    """Time both sides on each case, warm and cold, and print the table.

    Args:
        loop_permutations: Re-partitions the loop runs; fewer than P: its time scaled to P.
        repeats: Timed warm calls per side (after one warm-up).
        cold_runs: Fresh processes per side for the cold time.
        cases: Set sizes to time.
    """
    cases = list(cases)
    scale = PERMUTATIONS / loop_permutations
    with torch_threads(1):
        print(
            f"{cpu_name()}; torch {torch.__version__}, numpy {np.__version__}, torch threads {torch.get_num_threads()}, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load average (1 min) {os.getloadavg()[0]:.2f}"
        )
        print(f"100,000 re-partitions (P = {PERMUTATIONS:,} + the observed one); seconds are medians")
        header = (
            f"{'items per set':<14} {'vlbias warm':>11} {'loop warm':>10} {'warm x':>7} "
            f"{'vlbias cold':>11} {'loop cold':>10} {'cold x':>7} {'p vlbias':>9} {'p loop':>9}"
        )
        fast_colds = cold("vlbias", cases, loop_permutations, cold_runs)
        loop_colds = cold("loop", cases, loop_permutations, cold_runs)
        print(header)
        for case in cases:
            fast_warm, fast_p = median_seconds(side("vlbias", case, loop_permutations), repeats)
            loop_warm, loop_value = median_seconds(side("loop", case, loop_permutations), repeats)
            fast_cold, loop_cold = fast_colds[case], loop_colds[case] * scale
            loop_warm *= scale
            print(
                f"{case:<14} {fast_warm:>11.4f} {loop_warm:>10.3f} {loop_warm / fast_warm:>6.0f}x "
                f"{fast_cold:>11.4f} {loop_cold:>10.3f} {loop_cold / fast_cold:>6.0f}x {fast_p:>9.5f} {loop_value:>9.5f}",
                flush=True,
            )
    if scale != 1:
        print(f"(loop timed on {loop_permutations:,} re-partitions and scaled by {scale:g}; its p from those)")
    print(f"load average (1 min) at the end {os.getloadavg()[0]:.2f}; p-values differ by Monte-Carlo error")

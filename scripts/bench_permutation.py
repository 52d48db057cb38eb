"""Benchmark the WEAT permutation test: vlbias against a per-permutation numpy loop, on one thread, cold and warm.

Run me like this:  python scripts/bench_permutation.py [--loop-permutations 100000] [--repeats 5] [--cold-runs 3]

Cases: 25, 64, 256 and 1024 items per target set, 25 against 40 and 5 against 3000 (unequal sizes), each with 100,000
re-partitions (the observed one and P = 99,999 random ones, May et al.'s estimator (1 + #>=) / (1 + P)). Both
sides start from the same association scores s(w, A, B) and do the same work:

* vlbias: ``p_value_from_associations(s_x, s_y, n_permutations=P, allow_unequal_sizes=True)``;
* the loop, as May et al.'s ``sentbias/weat.py`` does it: per re-partition, shuffle the pooled indices in place
  (``rng.shuffle``), sum the scores of the first |X| and compare with the observed sum.

Warm: one warm-up call, then the median of ``--repeats`` calls, the same counts on both sides. Cold: the first
call for the case's set sizes in a fresh Python process (imports done; vlbias caches nothing across calls, so no
table survives from one case to the next), the median over ``--cold-runs`` processes per side; each process
times the cases in the order given. The loop runs ``--loop-permutations`` re-partitions and its time is scaled linearly to P when that is fewer
(the table says so). Threads: OMP/MKL/OpenBLAS are set to 1 before numpy and torch are imported and
``torch.set_num_threads(1)``. On a shared machine the medians still move with other work: the load average is
printed.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vlbias.environment import cpu_name  # noqa: E402
from vlbias.metrics.functional import p_value_from_associations  # noqa: E402

PERMUTATIONS = 99_999  # + the observed partition = 100,000 re-partitions
CASES = {
    "25": (25, 25),
    "64": (64, 64),
    "256": (256, 256),
    "1024": (1024, 1024),
    "25 vs 40": (25, 40),
    "5 vs 3000": (5, 3000),
}


def scores(n_x: int, n_y: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Association scores with a small lean of X (p-values away from 0 and 1, where sampling has work to do)."""
    generator = torch.Generator().manual_seed(n_x * 10_000 + n_y)
    s_x = 0.05 * torch.randn(n_x, generator=generator, dtype=torch.float64) + 0.004
    return s_x, 0.05 * torch.randn(n_y, generator=generator, dtype=torch.float64)


def vlbias_p(s_x: torch.Tensor, s_y: torch.Tensor, n_permutations: int) -> float:
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
    s_x, s_y = scores(*CASES[case])
    if name == "vlbias":
        return lambda: vlbias_p(s_x, s_y, PERMUTATIONS)
    return lambda: loop_p(s_x, s_y, loop_permutations)


def seconds(run: Callable[[], float]) -> tuple[float, float]:
    start = time.perf_counter()
    value = run()
    return time.perf_counter() - start, value


def warm(run: Callable[[], float], repeats: int) -> tuple[float, float]:
    seconds(run)  # warm-up
    times, value = [], 0.0
    for _ in range(repeats):
        elapsed, value = seconds(run)
        times.append(elapsed)
    return statistics.median(times), value


def cold(name: str, cases: Sequence[str], loop_permutations: int, runs: int) -> dict[str, float]:
    """Per case, the median over fresh processes of the time of its first call."""
    command = [sys.executable, __file__, "--cold-side", name, "--loop-permutations", str(loop_permutations)]
    runs_times = [
        subprocess.run([*command, "--cases", *cases], check=True, capture_output=True, text=True).stdout.split()
        for _ in range(runs)
    ]
    return {case: statistics.median(float(times[i]) for times in runs_times) for i, case in enumerate(cases)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop-permutations", type=int, default=PERMUTATIONS, help="fewer: time scaled to P")
    parser.add_argument("--repeats", type=int, default=5, help="timed warm calls per side (after one warm-up)")
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh processes per side for the cold time")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--cold-side", choices=("vlbias", "loop"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.cold_side:
        print(*(seconds(side(args.cold_side, case, args.loop_permutations))[0] for case in args.cases))
        return
    scale = PERMUTATIONS / args.loop_permutations
    print(
        f"{cpu_name()}; torch {torch.__version__}, numpy {np.__version__}, torch threads {torch.get_num_threads()}, "
        f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, load average (1 min) {os.getloadavg()[0]:.2f}"
    )
    print(f"100,000 re-partitions (P = {PERMUTATIONS:,} + the observed one); seconds are medians")
    header = (
        f"{'items per set':<14} {'vlbias warm':>11} {'loop warm':>10} {'warm x':>7} "
        f"{'vlbias cold':>11} {'loop cold':>10} {'cold x':>7} {'p vlbias':>9} {'p loop':>9}"
    )
    fast_colds = cold("vlbias", args.cases, args.loop_permutations, args.cold_runs)
    loop_colds = cold("loop", args.cases, args.loop_permutations, args.cold_runs)
    print(header)
    for case in args.cases:
        fast_warm, fast_p = warm(side("vlbias", case, args.loop_permutations), args.repeats)
        loop_warm, loop_value = warm(side("loop", case, args.loop_permutations), args.repeats)
        fast_cold, loop_cold = fast_colds[case], loop_colds[case] * scale
        loop_warm *= scale
        print(
            f"{case:<14} {fast_warm:>11.4f} {loop_warm:>10.3f} {loop_warm / fast_warm:>6.0f}x "
            f"{fast_cold:>11.4f} {loop_cold:>10.3f} {loop_cold / fast_cold:>6.0f}x {fast_p:>9.5f} {loop_value:>9.5f}",
            flush=True,
        )
    if scale != 1:
        print(f"(loop timed on {args.loop_permutations:,} re-partitions and scaled by {scale:g}; its p from those)")
    print(f"load average (1 min) at the end {os.getloadavg()[0]:.2f}; p-values differ by Monte-Carlo error")


if __name__ == "__main__":
    main()

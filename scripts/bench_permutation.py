"""Benchmark the WEAT permutation test: vlbias against a per-permutation Python loop on the same inputs.

Run me like this:  python scripts/bench_permutation.py [--loop-permutations 100000]

Cases: 25 items per target set with 100,000 random partitions, and 8 items per set tested exactly
(C(16, 8) = 12,870 partitions). Both methods start from the same embeddings, compute the associations
s(w, A, B) and then the p-value with the same estimator ((1 + #>=) / (1 + P) when sampled; the fraction
of partitions >= the observed one when exact). Prints seconds (the fastest of the repeats for either side:
the run least disturbed by other work on the machine, as ``timeit`` advises), p-values and the speed-up; the
loop's time is scaled linearly when it runs fewer permutations than vlbias.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Callable

import numpy as np
import torch

from vlbias.metrics.functional import weat_p_value

DIM, N_ATTRIBUTES = 64, 25


def embeddings(n_per_set: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(N_ATTRIBUTES, DIM)), rng.normal(size=(N_ATTRIBUTES, DIM))
    x = rng.normal(size=(n_per_set, DIM)) + 0.1 * a.mean(0)
    y = rng.normal(size=(n_per_set, DIM)) + 0.1 * b.mean(0)
    return [x, y, a, b]


def loop_associations(x, y, a, b) -> tuple[list[float], list[float]]:
    def unit(m):
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    def s(w):
        return (unit(w) @ unit(a).T).mean(1) - (unit(w) @ unit(b).T).mean(1)

    return s(x).tolist(), s(y).tolist()


def loop_sampled_p(sets, n_permutations: int, seed: int = 0) -> float:
    """The obvious way: shuffle X ∪ Y, take the first half, compare its sum, once per permutation."""
    s_x, s_y = loop_associations(*sets)
    pooled, observed = np.array(s_x + s_y), sum(s_x)
    rng = np.random.default_rng(seed)
    as_extreme = 0
    for _ in range(n_permutations):
        half = pooled[rng.permutation(len(pooled))[: len(s_x)]]
        as_extreme += half.sum() >= observed
    return (1 + as_extreme) / (1 + n_permutations)


def loop_exact_p(sets) -> float:
    s_x, s_y = loop_associations(*sets)
    pooled, observed = s_x + s_y, sum(s_x)
    splits = list(itertools.combinations(range(len(pooled)), len(s_x)))
    return sum(sum(pooled[i] for i in split) >= observed for split in splits) / len(splits)


def timed(run: Callable[[], float], repeats: int) -> tuple[float, float]:
    seconds, value = [], 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        value = run()
        seconds.append(time.perf_counter() - start)
    return min(seconds), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permutations", type=int, default=100_000)
    parser.add_argument("--loop-permutations", type=int, default=100_000, help="fewer runs the loop shorter, scaled")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--loop-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch.set_num_threads(THREADS) first; default: leave as is")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}, os.cpu_count() = "
        f"{os.cpu_count()}, load average (1 min) = {os.getloadavg()[0]:.2f}"
    )

    rows = []
    sampled = embeddings(25, seed=0)
    tensors = [torch.from_numpy(m) for m in sampled]
    fast = timed(lambda: weat_p_value(*tensors, n_permutations=args.permutations).item(), args.repeats)
    loop = timed(lambda: loop_sampled_p(sampled, args.loop_permutations), args.loop_repeats)
    scale = args.permutations / args.loop_permutations
    rows.append((f"sampled, 25 per set, {args.permutations:,} permutations", fast, (loop[0] * scale, loop[1])))

    exact = embeddings(8, seed=1)
    tensors = [torch.from_numpy(m) for m in exact]
    fast = timed(lambda: weat_p_value(*tensors).item(), args.repeats)
    loop = timed(lambda: loop_exact_p(exact), args.loop_repeats)
    rows.append(("exact, 8 per set, 12,870 partitions", fast, loop))

    print(f"{'case':<46} {'method':<12} {'seconds':>10} {'p-value':>12} {'speed-up':>9}")
    for case, (fast_s, fast_p), (loop_s, loop_p) in rows:
        print(f"{case:<46} {'vlbias':<12} {fast_s:>10.4f} {fast_p:>12.6f} {loop_s / fast_s:>8.1f}x")
        print(f"{'':<46} {'python loop':<12} {loop_s:>10.4f} {loop_p:>12.6f}")
    if scale != 1:
        print(
            f"(loop timed on {args.loop_permutations:,} permutations and scaled by {scale:g} to {args.permutations:,};"
            f" its p-value is from {args.loop_permutations:,})"
        )
    print("sampled p-values differ by Monte-Carlo error (about sqrt(p(1-p)/P)); exact p-values must be equal.")


if __name__ == "__main__":
    main()

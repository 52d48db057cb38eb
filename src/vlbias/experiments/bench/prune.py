"""MMBias Algorithm 1 (ranked): vlbias's closed-form leave-one-out against the per-dimension loop
(``scripts/bench_prune.py``).

Both sides start from the same random float64 embeddings (per test 2 x 50 images and 2 x 30 words, X and A
shifted along a shared direction so that there is a bias to remove) and the same MI per dimension, with
Θ at the MI's 0.9 quantile and N = 10% of the dimensions (Table 3). The loop is Algorithm 1 as written:
for each candidate dimension, drop it, re-normalise, recompute every test's effect size, then sort.
vlbias is :func:`vlbias.mitigation.select_dimensions`, which scores all dimensions of a test in one pass.
MI estimation is the same for both and left out. Prints the CPU, a table of median seconds over
``repeats`` runs (after one warm-up run each) and the ratio, and whether both chose the same dimensions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jsonargparse.typing import PositiveInt

from vlbias.experiments.bench.timing import machine, median_seconds
from vlbias.mitigation import BiasTest, select_dimensions
from vlbias.runtime.threads import torch_threads

N_IMAGES, N_WORDS, THETA_QUANTILE, FRACTION = 50, 30, 0.9, 0.1


def bias_tests(n_tests: int, dim: int, seed: int = 0) -> list[BiasTest]:
    """``n_tests`` random tests in ``dim`` dimensions, X and A leaning along a shared direction."""
    g = torch.Generator().manual_seed(seed)
    tests = []
    for t in range(n_tests):
        direction = torch.randn(dim, generator=g, dtype=torch.float64)
        x, y, a, b = (
            torch.randn(n, dim, generator=g, dtype=torch.float64) for n in (N_IMAGES, N_IMAGES, N_WORDS, N_WORDS)
        )
        tests.append(BiasTest(f"test{t}", x + 0.2 * direction, y, a + 0.2 * direction, b))
    return tests


def loop_effect_size(x, y, a, b) -> float:
    """The cross-modal effect size, computed directly from the re-normalised embeddings."""
    x, y, a, b = (F.normalize(m, dim=1) for m in (x, y, a, b))
    s_x = (x @ a.T).mean(1) - (x @ b.T).mean(1)
    s_y = (y @ a.T).mean(1) - (y @ b.T).mean(1)
    return float((s_x.mean() - s_y.mean()) / torch.cat([s_x, s_y]).std())


def loop_ranked(tests: list[BiasTest], mi: torch.Tensor, n_remove: int) -> list[int]:
    """Algorithm 1, one dimension at a time, mean |d| over tests."""
    theta = float(torch.quantile(mi, THETA_QUANTILE))
    dim = mi.numel()
    psi_all = sum(abs(loop_effect_size(*t[1:])) for t in tests) / len(tests)
    found = []
    for d in range(dim):
        if mi[d] < theta:
            keep = torch.cat([torch.arange(d), torch.arange(d + 1, dim)])
            psi = sum(abs(loop_effect_size(*(m[:, keep] for m in t[1:]))) for t in tests) / len(tests)
            if psi < psi_all:
                found.append((psi, d))
    return [d for _, d in sorted(found)[:n_remove]]


def bench_prune(dims: PositiveInt = 512, tests: int = 10, threads: int = 1, repeats: PositiveInt = 5) -> None:
    """Time the ranked selection both ways and print the table.

    Args:
        dims: Embedding dimensions D.
        tests: Bias tests whose mean |d| the selection lowers.
        threads: Torch threads.
        repeats: Timed runs of each side after a warm-up; median reported.
    """
    with torch_threads(threads):
        bias = bias_tests(tests, dims)
        mi = torch.rand(dims, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        n_remove = round(FRACTION * dims)

        def vectorised() -> list[int]:
            return select_dimensions(bias, mi, n_remove, theta_quantile=THETA_QUANTILE).removed

        fast, fast_chosen = median_seconds(vectorised, repeats)
        slow, slow_chosen = median_seconds(lambda: loop_ranked(bias, mi, n_remove), repeats)
    print(
        f"{machine(threads)}; D = {dims}, {tests} tests "
        f"(2 x {N_IMAGES} images, 2 x {N_WORDS} words each), N = {n_remove}, median of {repeats}"
    )
    print(f"{'method':<34}{'seconds':>10}{'ratio':>10}")
    print(f"{'vlbias closed-form leave-one-out':<34}{fast:>10.4f}{1.0:>10.1f}")
    print(f"{'per-dimension loop':<34}{slow:>10.4f}{slow / fast:>10.1f}")
    print(f"same dimensions removed: {fast_chosen == slow_chosen} ({len(fast_chosen)} dims)")

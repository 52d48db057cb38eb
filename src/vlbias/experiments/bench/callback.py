"""Wall time of one BiasSuiteCallback measurement of the quickstart model on 1 and on 2 CPU processes
(``scripts/bench_callback.py``).

The callback's work per epoch is :func:`vlbias.suites.run.run_suite` for each configured suite, every rank
over its own shard of the stimuli. This times that call for the quickstart's suites (tiny CLIP, BiasWorld at
bias strength 0.9: MMBias cross-modal, VLStereoSet caption selection) in one run, three ways:

* 1 process, 1 thread; 1 process, 2 threads; 2 processes (gloo), 1 thread each.

Each setting measures once to warm up, then ``repeats`` times; the table gives the median wall time of the
whole measurement (rank 0's clock, after a barrier), the stimuli each rank probed, and the time against
1 process, 1 thread.
"""

from __future__ import annotations

import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from jsonargparse.typing import PositiveInt

from vlbias.runtime.environment import cpu_name

SUITES = {
    "mmbias": {"statistics": {"n_permutations": 10_000, "n_bootstrap": 1_000}},
    "vlstereoset": {"shift": False, "statistics": {"n_bootstrap": 1_000}},
}


def _measure_times(
    rank: int, world_size: int, threads: int, port: int, repeats: int, eval_per_combination: int, results
) -> None:
    """One rank of one setting: the suites measured once to warm up, then ``repeats`` times; rank 0 puts the median
    seconds and the stimuli per rank on ``results``."""
    torch.set_num_threads(threads)
    if world_size > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    from vlbias.data.biasworld import BiasWorld
    from vlbias.models.registry import load
    from vlbias.suites.options import check_suite_options
    from vlbias.suites.run import build_suite, run_suite

    world = BiasWorld(bias_strength=0.9, eval_per_combination=eval_per_combination)
    suites = [build_suite(check_suite_options(name, options), world) for name, options in SUITES.items()]
    adapter = load("clip", tiny=True, device="cpu", options={"seed": 0}).eval()
    times, per_rank = [], []
    for repeat in range(repeats + 1):  # the first is the warm-up
        if world_size > 1:
            dist.barrier()
        start = time.perf_counter()
        per_rank = []
        for suite in suites:
            result, _ = run_suite(suite, adapter, model="clip", checkpoint=None, seed=0, config={})
            per_rank.append(result.config["stimuli_per_rank"])
        if world_size > 1:
            dist.barrier()
        if repeat:
            times.append(time.perf_counter() - start)
    if rank == 0:
        results.put((statistics.median(times), per_rank))
    if world_size > 1:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _time(world_size: int, threads: int, repeats: int, eval_per_combination: int) -> tuple[float, list]:
    context = mp.get_context("spawn")
    results = context.Queue()
    arguments = (world_size, threads, _free_port(), repeats, eval_per_combination, results)
    mp.start_processes(_measure_times, args=arguments, nprocs=world_size, start_method="spawn")
    return results.get()


def bench_callback(repeats: PositiveInt = 5, eval_per_combination: PositiveInt = 32) -> list[tuple[str, float, list]]:
    """Time the callback's measurement in each setting and print the table.

    Returns the table's rows.

    Args:
        repeats: Timed measurements per setting, after one warm-up.
        eval_per_combination: BiasWorld images per combination (the quickstart's 32).
    """
    settings = [("1 process, 1 thread", 1, 1), ("1 process, 2 threads", 1, 2), ("2 processes, 1 thread each", 2, 1)]
    rows = [
        (label, *_time(world_size, threads, repeats, eval_per_combination)) for label, world_size, threads in settings
    ]
    print(
        f"CPU: {cpu_name()}, {os.cpu_count()} cores; suites: {', '.join(SUITES)}; median of {repeats} after a warm-up"
    )
    print("| setting | wall s | stimuli per rank (" + ", ".join(SUITES) + ") | time vs 1 process, 1 thread |")
    print("|---|---:|---|---:|")
    for label, seconds, per_rank in rows:
        print(f"| {label} | {seconds:.2f} | {per_rank} | {seconds / rows[0][1]:.2f}x |")
    return rows

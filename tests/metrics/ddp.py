"""Run a metric-feeding function on two CPU processes joined by gloo, as DDP would, and collect what
each rank computed: the shared harness of the metrics' two-process tests."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable, Iterable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, port: int, out_dir: str, run: Callable[[Iterable[int]], object], n_batches: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    try:
        torch.save(run(range(rank, n_batches, WORLD_SIZE)), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def results_per_rank(run: Callable[[Iterable[int]], object], n_batches: int) -> list:
    """``run(batch_indices)`` on each rank, rank r taking batches r, r + 2, ... of ``n_batches``; returns
    each rank's result. ``run`` must be a module-level function (the processes are spawned) and returns
    what ``torch.load`` reads back with ``weights_only``: tensors in dicts, lists and numbers."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(_free_port(), out_dir, run, n_batches), nprocs=WORLD_SIZE, join=True)
        return [torch.load(os.path.join(out_dir, f"rank{rank}.pt")) for rank in range(WORLD_SIZE)]

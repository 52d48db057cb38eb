"""How many torch threads a process should use: the CPUs it may run on, shared by the processes of its node.

On a shared or loaded host, torch's default (every core) oversubscribes: one issue measured a run 9.5x slower
than the same run on one thread. Lightning's DDP launcher sets ``LOCAL_WORLD_SIZE`` for each process it starts.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from vlbias.errors import ConfigError


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else every CPU)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_threads() -> int:
    """``OMP_NUM_THREADS`` when the user set it; otherwise :func:`available_cpus` divided by the processes on
    this node (``LOCAL_WORLD_SIZE``, 1 when unset), at least 1.

    Example:
        >>> default_threads() >= 1
        True
    """
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    return max(1, available_cpus() // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the block with torch's intra-op threads at ``threads`` (``None``: :func:`default_threads`), yielding
    the number; the previous setting is restored after.

    Example:
        >>> with torch_threads(1) as threads:
        ...     torch.get_num_threads() == threads == 1
        True
    """
    if threads is None:
        threads = default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"Expected `threads` to be a positive integer but got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)

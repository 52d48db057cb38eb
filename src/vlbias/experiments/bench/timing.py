"""What the benchmarks share: the clocks they read, a call timed with the GPU's queue drained, the median of
repeated calls after a warm-up, rounds that alternate their order so that drift in the machine's load hits every
side alike, the precision a step runs at, and the line that names the machine beside a table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Literal, TypeVar

import torch

from vlbias.errors import ConfigError
from vlbias.runtime.environment import cpu_name

T = TypeVar("T")
#: wall: elapsed time; thread: this thread's CPU time, which leaves out the time other processes hold the core
#: (a loaded machine), valid on a CPU with one torch thread only.
Clock = Literal["wall", "thread"]
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread": time.thread_time}
#: fp32: full precision; bf16: bf16 autocast, as ``precision: bf16-mixed`` trains.
Precision = Literal["fp32", "bf16"]


def clock_for(clock: Clock, threads: int, device: str = "cpu") -> Callable[[], float]:
    """The clock named ``clock`` (:data:`Clock`); ``thread`` is refused unless the work runs on the CPU with one
    thread (other threads' time, or the GPU's, would go uncounted).

    Example:
        >>> clock_for("wall", threads=4) is time.perf_counter
        True
    """
    if clock == "thread" and (torch.device(device).type != "cpu" or threads != 1):
        raise ConfigError(f"--clock thread needs --device cpu and --threads 1, not {device} and {threads}")
    return CLOCKS[clock]


def synchronize(device: torch.device | str) -> None:
    """Wait for the GPU's queued work when ``device`` is a GPU (its kernels run asynchronously); nothing on a CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device | str, precision: Precision) -> torch.autocast:
    """The context a step runs in at ``precision`` on ``device`` (bf16 autocast, or nothing changed for fp32)."""
    device = torch.device(device)
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def elapsed(call: Callable[[], object], device: torch.device | str = "cpu", clock=time.perf_counter) -> float:
    """Seconds of one ``call`` by ``clock``, the GPU's queue drained before and after."""
    synchronize(device)
    start = clock()
    call()
    synchronize(device)
    return clock() - start


def median_seconds(run: Callable[[], T], repeats: int) -> tuple[float, T]:
    """One warm-up call, then the median wall seconds of ``repeats`` calls; with the warm-up call's result.

    Example:
        >>> seconds, result = median_seconds(lambda: 42, repeats=3)
        >>> seconds >= 0 and result == 42
        True
    """
    result = run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def interleaved(names: Mapping[str, object] | list[str], repeats: int, time_one: Callable[[str], float]) -> dict:
    """``repeats`` rounds, each timing every name once with ``time_one(name)``, the order reversed every other round
    so that a drift in the machine's load hits every side alike; returns each name's times.

    Example:
        >>> order = []
        >>> times = interleaved(["a", "b"], 2, lambda name: order.append(name) or 1.0)
        >>> order, times
        (['a', 'b', 'b', 'a'], {'a': [1.0, 1.0], 'b': [1.0, 1.0]})
    """
    names = list(names)
    times: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name in names if repeat % 2 == 0 else reversed(names):
            times[name].append(time_one(name))
    return times


def machine(threads: int | None = None) -> str:
    """``"CPU: <model name>, <threads> thread(s)"`` (without the threads when ``None``): the line beside a
    benchmark's table (a speed-up depends on the CPU, weighing per-call overhead against arithmetic)."""
    return f"CPU: {cpu_name()}" + ("" if threads is None else f", {threads} thread(s)")

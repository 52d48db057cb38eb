"""What every benchmark script prints beside its table: the CPU it ran on (a speed-up depends on it, weighing
per-call overhead against arithmetic)."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else what :mod:`platform` knows.

    Example:
        >>> isinstance(cpu_name(), str)
        True
    """
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()

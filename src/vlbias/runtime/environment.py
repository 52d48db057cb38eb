"""The machine and software a number was computed on. Benchmark scripts print it beside their tables (a speed-up
depends on the CPU, weighing per-call overhead against arithmetic) and every result records it: float rounding
differs between CPUs and kernels, and training amplifies it, so a number belongs to its machine as well as to its
commit and seed (docs/results/fairvlp.md: one seed's B@V-L moved from 14.78 to 20.03 between two CPUs at one commit).

To compare with a number from a machine whose ``cpu_kernels`` differ, run with the environment variable
``ATEN_CPU_CAPABILITY`` set to theirs (``avx2``, ``default``): the quickstart then matched across two machines to the
last digit, though FairVLP's ALBEF runs still did not (other libraries dispatch by CPU too)."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

import numpy as np
import torch


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


def environment(device: torch.device | str = "cpu") -> dict[str, str | None]:
    """Versions of Python, torch, NumPy and transformers, the CPU and the CPU kernels torch dispatches to
    (``"AVX512"``, ``"AVX2"``, ``"DEFAULT"``: they round differently), and the GPU when ``device`` is one.

    Example:
        >>> info = environment()
        >>> info["torch"] == torch.__version__ and info["gpu"] is None
        True
    """
    device = torch.device(device)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "transformers": metadata.version("transformers"),
        "cpu": cpu_name(),
        "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }

r"""What the throughput benchmark reads besides the clock: the floating-point operations of one step, the device's
dense peak for the precision a step runs at, and the memory a step holds.

Model FLOPs utilisation (MFU) of a step of :math:`F` FLOPs taking :math:`t` seconds on a device of dense peak
:math:`P` FLOP/s at the step's precision:

.. math::
    \text{MFU} = \frac{F / t}{P}

:math:`F` is counted by ``torch.utils.flop_counter.FlopCounterMode`` on one step (forward and backward: matrix
products, convolutions and attention, 2 FLOPs a multiply-add; an optimizer step adds none). The peaks are the
vendors' datasheet figures for dense tensor-core work (the datasheets' bf16 and TF32 figures are quoted "with
sparsity", twice the dense rate, for H100 and H200; A100's give both):

================ ========== ============ ============ =======================================================
GPU              bf16 dense TF32 dense   FP32 (CUDA)  source
================ ========== ============ ============ =======================================================
H100 SXM5        989.5      494.5        67           NVIDIA H100 Tensor Core GPU datasheet (SXM column:
                                                      BF16 1,979 and TF32 989 TFLOPS with sparsity)
H100 PCIe        756.5      378          51           the same datasheet, PCIe column (1,513 and 756 sparse)
H200 (SXM)       989.5      494.5        67           NVIDIA H200 Tensor Core GPU datasheet (SXM column:
                                                      BF16 1,979 and TF32 989 TFLOPS with sparsity)
A100 (SXM, PCIe) 312        156          19.5         NVIDIA A100 Tensor Core GPU datasheet (dense figures;
                                                      624 and 312 with sparsity)
================ ========== ============ ============ =======================================================

An fp32 step's peak is the TF32 one when PyTorch lets float32 matrix products use TF32
(``torch.get_float32_matmul_precision()`` ``"high"`` or ``"medium"``), else the FP32 one (the default
``"highest"``). A GPU not in the table, and the CPU, have no peak here: MFU is not computed.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

#: Dense peak TFLOP/s per GPU kind: ``(bf16, tf32, fp32)`` (module docstring's table and sources).
PEAK_TFLOPS: dict[str, tuple[float, float, float]] = {
    "H100 SXM5": (989.5, 494.5, 67.0),
    "H100 PCIe": (756.5, 378.0, 51.0),
    "H200": (989.5, 494.5, 67.0),
    "A100": (312.0, 156.0, 19.5),
}


def gpu_kind(device_name: str) -> str | None:
    """The row of :data:`PEAK_TFLOPS` of a GPU named ``device_name`` (``torch.cuda.get_device_name``), ``None`` for
    one not in the table (the NVL cards among them).

    Example:
        >>> gpu_kind("NVIDIA H100 80GB HBM3"), gpu_kind("NVIDIA H100 PCIe"), gpu_kind("NVIDIA H200")
        ('H100 SXM5', 'H100 PCIe', 'H200')
        >>> gpu_kind("NVIDIA A100-SXM4-80GB"), gpu_kind("NVIDIA H100 NVL"), gpu_kind("Tesla T4")
        ('A100', None, None)
    """
    if "NVL" in device_name:  # H100 NVL, H200 NVL: other clocks, not in the table
        return None
    if "H200" in device_name:
        return "H200"
    if "H100" in device_name:
        return "H100 PCIe" if "PCIe" in device_name else "H100 SXM5"
    if "A100" in device_name:
        return "A100"
    return None


def peak_flops(device: torch.device | str, precision: str) -> float | None:
    """Dense peak FLOP/s of ``device`` at ``precision`` (``fp32`` or ``bf16``; module docstring), ``None`` on the
    CPU or a GPU not in :data:`PEAK_TFLOPS`."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    kind = gpu_kind(torch.cuda.get_device_name(device))
    if kind is None:
        return None
    bf16, tf32, fp32 = PEAK_TFLOPS[kind]
    if precision == "bf16":
        return bf16 * 1e12
    return (fp32 if torch.get_float32_matmul_precision() == "highest" else tf32) * 1e12


def mfu(flops: int, seconds: float, peak: float | None) -> float | None:
    """``(flops / seconds) / peak`` (module docstring), ``None`` without a peak.

    Example:
        >>> mfu(10**12, 0.5, 4e12)
        0.5
    """
    return None if peak is None else flops / seconds / peak


def counted_flops(call: Callable[[], object]) -> int:
    """FLOPs of one ``call`` by ``FlopCounterMode`` (module docstring).

    Example:
        >>> counted_flops(lambda: torch.ones(2, 3) @ torch.ones(3, 4))  # 2 x 3 x 4 multiply-adds
        48
    """
    with FlopCounterMode(display=False) as counter:
        call()
    return counter.get_total_flops()


def resident_bytes() -> int:
    """This process's resident memory now, in bytes (Linux ``/proc/self/statm``; the peak resident memory of the
    process, ``ru_maxrss``, where there is none)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

"""How measurements run: no gradients, and bf16 autocast on CUDA (fp32 on CPU)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def measuring(device: str | torch.device, autocast: bool = True) -> Iterator[None]:
    """Context for every measurement: ``torch.no_grad()``, plus ``torch.autocast`` to bfloat16
    when ``device`` is CUDA and ``autocast`` is true. On CPU everything stays float32, so
    CPU results are exact and comparable across runs.

    Example:
        >>> layer = torch.nn.Linear(4, 2)
        >>> with measuring("cpu"):
        ...     out = layer(torch.ones(1, 4))
        >>> out.dtype, out.requires_grad
        (torch.float32, False)
    """
    device = torch.device(device)
    with torch.no_grad():
        if autocast and device.type == "cuda":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                yield
        else:
            yield

"""How measurements and attacks run: bf16 autocast on CUDA (fp32 on CPU); measurements without gradients."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def autocast_dtype(device: str | torch.device) -> torch.dtype | None:
    """The dtype that :func:`mixed_precision` autocasts to on ``device``: bfloat16 on CUDA, ``None``
    (no autocast, float32) elsewhere, so that CPU results are exact and comparable across runs."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else None


def autocast_name(device: str | torch.device) -> str | None:
    """:func:`autocast_dtype` as results and cache keys record it: ``"bfloat16"`` or ``None``."""
    dtype = autocast_dtype(device)
    return None if dtype is None else str(dtype).removeprefix("torch.")


@contextlib.contextmanager
def mixed_precision(device: str | torch.device, enabled: bool = True) -> Iterator[None]:
    """``torch.autocast`` to :func:`autocast_dtype` of ``device`` when it has one and ``enabled``."""
    dtype = autocast_dtype(device) if enabled else None
    if dtype is None:
        yield
    else:
        with torch.autocast(torch.device(device).type, dtype=dtype):
            yield


@contextlib.contextmanager
def measuring(device: str | torch.device, autocast: bool = True) -> Iterator[None]:
    """Context for every measurement: ``torch.no_grad()``, plus :func:`mixed_precision` (bfloat16
    autocast when ``device`` is CUDA and ``autocast`` is true). On CPU everything stays float32.

    Example:
        >>> layer = torch.nn.Linear(4, 2)
        >>> with measuring("cpu"):
        ...     out = layer(torch.ones(1, 4))
        >>> out.dtype, out.requires_grad
        (torch.float32, False)
    """
    with torch.no_grad(), mixed_precision(device, autocast):
        yield

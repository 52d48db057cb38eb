"""Model names -> adapter classes (the table is :mod:`vlbias.models.catalog`), and :func:`load`,
the one way to get a model."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path

import torch

from vlbias.errors import ConfigError
from vlbias.models.base import ModelAdapter
from vlbias.models.catalog import adapter_class, list_models, models_with

__all__ = ["adapter_class", "describe_models", "list_models", "load", "models_with"]


def describe_models() -> list[dict[str, object]]:
    """``[{"name": ..., "capabilities": [...]}, ...]`` for ``vlbias models --json``."""
    return [
        {"name": name, "capabilities": sorted(c.value for c in adapter_class(name).capabilities)}
        for name in list_models()
    ]


def load(
    name: str,
    checkpoint: str | Path | None = None,
    tiny: bool = False,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    options: dict | None = None,
) -> ModelAdapter:
    """Build adapter ``name`` from ``checkpoint`` (hub id, local directory or file), or a tiny
    random instance when ``tiny`` is true, in eval mode on ``device`` (default: CUDA if present).

    ``options`` are the adapter's own keyword arguments of ``from_pretrained`` / ``tiny``
    (e.g. ``region_features`` for VisualBERT and LXMERT, ``itm_checkpoint`` for ViLT,
    ``image_size`` for ALBEF); an option the adapter does not take is refused by name.

    Example:
        >>> from vlbias.models import load
        >>> model = load("clip", tiny=True)
        >>> sorted(c.value for c in model.capabilities)
        ['embed']
    """
    cls = adapter_class(name)
    if tiny and checkpoint is not None:
        raise ConfigError("Give either `checkpoint` or `tiny=True`, not both.")
    if not tiny and checkpoint is None:
        raise ConfigError(f"Model {name!r} needs a `checkpoint` (hub id or local path), or `tiny=True`.")
    builder = cls.tiny if tiny else functools.partial(cls.from_pretrained, checkpoint)
    options = options or {}
    accepted = inspect.signature(builder).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            which = "tiny" if tiny else "from_pretrained"
            raise ConfigError(
                f"Model {name!r} does not take option(s) {unknown} in {which}; "
                f"it takes: {', '.join(k for k in accepted if k not in ('seed', 'name_or_path')) or 'none'}."
            )
    adapter = builder(**options)
    device = (
        torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    adapter = adapter.to(device=device, dtype=dtype) if dtype is not None else adapter.to(device)
    return adapter.eval()

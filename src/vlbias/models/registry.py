"""Model names -> adapter classes (the table is :mod:`vlbias.models.catalog`), :func:`load`, the one way to get a
model, and the checks of its arguments at the door.

What a user writes (a ``--device``, ``--model_options``, a module's or a suite's model options) is checked once,
where it enters, by :func:`check_device` and :func:`check_model_options`, before any data or model is loaded;
:func:`load` then takes the checked values and does not check them again.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

import torch

from vlbias.errors import ConfigError
from vlbias.models.base import ModelAdapter
from vlbias.models.catalog import adapter_class
from vlbias.models.tiny_sizes import split_sizes
from vlbias.options import accepted_types, check_options

__all__ = ["available_devices", "check_device", "check_model_options", "default_device", "load"]


def load(
    name: str,
    checkpoint: str | Path | None = None,
    tiny: bool = False,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    options: dict | None = None,
) -> ModelAdapter:
    """Build adapter ``name`` from ``checkpoint`` (hub id, local directory or file), or a tiny
    random instance when ``tiny`` is true, in eval mode on ``device`` (``None``: :func:`default_device`).

    ``options`` are the adapter's own keyword arguments of ``from_pretrained`` / ``tiny``
    (e.g. ``region_features`` for VisualBERT and LXMERT, ``itm_checkpoint`` for ViLT,
    ``image_size`` for ALBEF), a tiny model's sizes among them by name (``hidden_size``: the fields of the family's
    :attr:`~vlbias.models.base.ModelAdapter.tiny_sizes`, which replace its defaults). ``device`` and ``options``
    are taken as checked: whoever takes them from a user checks them first, with :func:`check_device` and
    :func:`check_model_options`.

    Example:
        >>> model = load("clip", tiny=True)
        >>> sorted(c.value for c in model.capabilities)
        ['embed']
    """
    if tiny and checkpoint is not None:
        raise ConfigError(
            f"Give either `checkpoint` ({checkpoint!r}) or `tiny=True`, not both (a config that names a checkpoint "
            "trains a tiny model with --model.init_args.model '{tiny: true, checkpoint: null}')."
        )
    if not tiny and checkpoint is None:
        raise ConfigError(f"Model {name!r} needs a `checkpoint` (hub id or local path), or `tiny=True`.")
    cls = adapter_class(name)
    if tiny:
        sizes, others = split_sizes(cls.tiny_sizes, options or {})
        adapter = cls.tiny(**others, sizes=dataclasses.replace(cls.tiny_sizes, **sizes))
    else:
        adapter = cls.from_pretrained(checkpoint, **(options or {}))
    if getattr(adapter, "placed_by_device_map", False):
        return adapter.eval()  # placed by accelerate over the devices its ``device_map`` names: left where it is
    device = default_device() if device is None else device
    adapter = adapter.to(device=device, dtype=dtype) if dtype is not None else adapter.to(device)
    return adapter.eval()


def check_model_options(name: str, options: dict | None, tiny: bool) -> dict:
    """``options`` checked against the keyword parameters of adapter ``name``'s ``tiny`` (when ``tiny``; and the
    fields of its :attr:`~vlbias.models.base.ModelAdapter.tiny_sizes`) or ``from_pretrained``: an unknown name, or
    a value of the wrong type, is refused by name."""
    cls, method, what = adapter_class(name), "tiny" if tiny else "from_pretrained", f"model {name!r} option"
    skip = {"name_or_path", "sizes"}
    accepted = list(accepted_types(cls, skip, method)) + (list(cls.tiny_sizes.names()) if tiny else [])
    unknown = sorted(set(options or {}) - set(accepted)) if isinstance(options, dict) else []
    if unknown:
        close = [match for key in unknown for match in difflib.get_close_matches(str(key), accepted, n=2)]
        hint = f" (did you mean {' or '.join(f'`{key}`' for key in close)}?)" if close else ""
        raise ConfigError(
            f"Model {name!r} does not take option(s) {unknown} in {method}{hint}; it takes: {', '.join(accepted) or 'none'}."
        )
    if not tiny or not options:
        return check_options(options, cls, what, skip=skip, method=method)
    sizes, others = split_sizes(cls.tiny_sizes, options)
    checked = check_options(others, cls, what, skip=skip, method=method)
    checked |= check_options(sizes, type(cls.tiny_sizes), what)
    return {key: checked[key] for key in options}


def available_devices() -> list[str]:
    """The torch devices of this machine: ``cpu``, then ``cuda:<i>`` for each GPU, then ``mps`` where present."""
    mps = torch.backends.mps.is_available()
    return ["cpu", *(f"cuda:{index}" for index in range(torch.cuda.device_count())), *(["mps"] if mps else [])]


def default_device() -> torch.device:
    """The device a model goes to when none is named: CUDA if present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def check_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a :class:`torch.device` (``None``: :func:`default_device`); a name torch does not know, or a
    device this machine lacks, is refused with the devices it has.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
    """
    if device is None:
        return default_device()
    available = available_devices()
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        parsed = None
    present = parsed is not None and (
        parsed.type == "cpu"
        or (parsed.type == "cuda" and (parsed.index or 0) < torch.cuda.device_count())
        or (parsed.type == "mps" and "mps" in available)
    )
    if not present:
        raise ConfigError(f"Expected `device` to be one of this machine's devices {available} but got {str(device)!r}.")
    return parsed

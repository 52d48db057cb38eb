"""Strict loading: a checkpoint whose keys do not match the model is an error, not a warning."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from torch import nn

from vlbias.errors import InputError

_SHOWN = 10


def check_keys(model_name: str, source: str | Path, missing: Iterable[str], unexpected: Iterable[str]) -> None:
    """Raise :class:`InputError` listing missing and unexpected keys (the first few of each)."""
    missing, unexpected = sorted(missing), sorted(unexpected)
    if not missing and not unexpected:
        return
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected)):
        if keys:
            more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
            parts.append(f"{len(keys)} {label} key(s): {', '.join(keys[:_SHOWN])}{more}")
    raise InputError(f"Checkpoint {str(source)!r} does not match model {model_name!r}: {'; '.join(parts)}.")


def from_pretrained_strict(model_class: type[nn.Module], source: str | Path, model_name: str) -> nn.Module:
    """``model_class.from_pretrained(source)`` that refuses a checkpoint with missing or unexpected
    keys, and turns "cannot find it" (no such directory, no weights in it, hub unreachable)
    into an :class:`InputError` naming the checkpoint."""
    try:
        model, info = model_class.from_pretrained(str(source), output_loading_info=True)
    except OSError as err:
        raise InputError(
            f"Checkpoint {str(source)!r} for model {model_name!r} is neither a local directory holding "
            f"{model_class.__name__} weights nor a reachable hub id: {err}"
        ) from err
    check_keys(model_name, source, info["missing_keys"], info["unexpected_keys"])
    return model

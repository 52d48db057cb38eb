"""Strict loading: a checkpoint is checked before a library reads it (:func:`check_checkpoint`), and one
whose keys do not match the model is an error, not a warning."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection, Iterable
from pathlib import Path

from torch import nn

from vlbias.errors import InputError
from vlbias.runtime.log_levels import quieted

_SHOWN = 10
CONFIG_FILE = "config.json"
WEIGHTS_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt", ".safetensors")


def looks_like_path(source: str | Path) -> bool:
    """Whether ``source`` can only be a local path, not a hub id (``namespace/name``) or a URL: it starts with
    ``/``, ``.`` or ``~``, holds more than one ``/`` or the OS's own separator, or ends like a weights file.

    Example:
        >>> [looks_like_path(s) for s in ("./ckpt", "~/ckpt", "/abs/ckpt", "a/b/c", "model.pth", "openai/clip")]
        [True, True, True, True, True, False]
    """
    source = str(source)
    if "://" in source:
        return False
    return (
        source.startswith(("/", ".", "~"))
        or source.count("/") > 1
        or os.sep != "/"
        and os.sep in source
        or source.endswith(WEIGHTS_SUFFIXES)
    )


def check_checkpoint(source: str | Path, model_name: str, model_types: Collection[str] = ()) -> None:
    """Refuse, with an :class:`InputError` naming the checkpoint, the file and what was expected, a checkpoint
    that cannot be one of ``model_name`` before a library reads it (and crashes deep inside):

    - a ``source`` that :func:`looks_like_path` but does not exist is a missing path (not a malformed hub id);
    - in a local directory every ``*.json`` must be valid JSON, every ``*.txt`` (vocabularies, merges)
      UTF-8 text and every ``*.safetensors`` whole (:func:`check_safetensors`); where ``model_types`` are given
      (the families the adapter's classes load, their ``config_class.model_type``), ``config.json`` must exist, be a
      JSON object, and its ``model_type``, when it has one, must be one of them: a CLIP checkpoint given to
      ``--model blip`` is refused by family.

    A hub id or URL, and a single file, are left to the loader.
    """
    path = Path(source)
    if not path.exists():
        if looks_like_path(source):
            raise InputError(
                f"Checkpoint {str(source)!r} for model {model_name!r} does not exist "
                f"(resolved: {str(path.expanduser().absolute())!r}); expected a local directory or file."
            )
        return
    if not path.is_dir():
        return
    for file in sorted(path.glob("*.json")):
        _read_json(file, source, model_name)
    for file in sorted(path.glob("*.txt")):
        try:
            file.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise InputError(
                f"Checkpoint {str(source)!r} for model {model_name!r}: {str(file)!r} is not UTF-8 text "
                f"(byte {err.start}); expected the tokenizer file save_pretrained writes."
            ) from err
    for file in sorted(path.glob("*.safetensors")):
        check_safetensors(file, f"Checkpoint {str(source)!r} for model {model_name!r}")
    if model_types:
        _check_family(path, source, model_name, sorted(model_types))


def check_safetensors(file: Path, owner: str) -> None:
    """Refuse, in one line beginning with ``owner`` (what the file belongs to), a ``*.safetensors`` file that
    safetensors cannot open: truncated (its header lists more bytes than the file holds), or not safetensors.
    Reading the header reads no tensor."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(file), "pt"):
            pass
    except (SafetensorError, OSError) as err:
        raise InputError(
            f"{owner}: {str(file)!r} is not a whole safetensors file ({err}); expected the file as it was saved "
            "(was it cut short by a copy or a full disk?)."
        ) from err


def _read_json(file: Path, source: str | Path, model_name: str) -> object:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(
            f"Checkpoint {str(source)!r} for model {model_name!r}: {str(file)!r} is not valid JSON ({err}); "
            "expected the file save_pretrained writes."
        ) from err


def _check_family(path: Path, source: str | Path, model_name: str, model_types: list[str]) -> None:
    expected = " or ".join(repr(t) for t in model_types)
    config_file = path / CONFIG_FILE
    if not config_file.is_file():
        raise InputError(
            f"Checkpoint {str(source)!r} for model {model_name!r} has no {CONFIG_FILE}; expected a save_pretrained "
            f"directory of a model_type {expected} model."
        )
    config = _read_json(config_file, source, model_name)
    if not isinstance(config, dict):
        raise InputError(
            f"Checkpoint {str(source)!r} for model {model_name!r}: {str(config_file)!r} holds a "
            f"{type(config).__name__}; expected a JSON object."
        )
    found = config.get("model_type")
    if found is not None and found not in model_types:
        raise InputError(
            f"Checkpoint {str(source)!r} is a {found!r} model ({str(config_file)!r} has model_type {found!r}) but "
            f"model {model_name!r} loads model_type {expected}; give the --model of its family."
        )


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


def from_pretrained_strict(
    model_class: type[nn.Module],
    source: str | Path,
    model_name: str,
    model_types: Collection[str] = (),
    **options: object,
) -> nn.Module:
    """``model_class.from_pretrained(source)`` that first checks ``source`` (:func:`check_checkpoint`, family:
    ``model_types``, by default ``model_class.config_class.model_type``; an ``Auto`` class names them; ``options``
    go to ``from_pretrained``: dtype, attention kernel, device map), refuses a checkpoint with missing or unexpected keys, and turns
    "cannot find it" (no weights in a directory, hub unreachable) into an :class:`InputError` naming the
    checkpoint."""
    check_checkpoint(source, model_name, model_types or {model_class.config_class.model_type})
    try:  # the hub client's "thrown while requesting" warning says what the error below says
        with quieted(logging.ERROR, "huggingface_hub"):
            model, info = model_class.from_pretrained(str(source), output_loading_info=True, **options)
    except OSError as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(
            f"Checkpoint {str(source)!r} for model {model_name!r} is neither a local directory holding "
            f"{model_class.__name__} weights nor a hub id this machine can reach ({reason}): give a local directory "
            "with its config.json and weights (one written by save_pretrained, or downloaded where the hub is "
            "reachable), or set HF_HUB_OFFLINE=1 to use the hub cache."
        ) from err
    check_keys(model_name, source, info["missing_keys"], info["unexpected_keys"])
    return model

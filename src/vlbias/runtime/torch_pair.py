"""Whether the installed torchvision was built for the installed torch, checked where vlbias first reaches
torchvision: :mod:`vlbias.metrics` imports torchvision through :func:`import_torchvision` before ``torchmetrics``
does (it imports torchvision when it is installed), :mod:`vlbias.models.preprocess` takes its transforms from it,
and the command line turns the error into its one line wherever another library reached torchvision first
(:func:`torchvision_mismatch`). Importing this module imports no torch.

A torchvision built for another torch (a CPU torch beside a CUDA build of torchvision, or one release beside
another) fails at import with ``RuntimeError: operator torchvision::nms does not exist``, from deep inside its
operator registration; :func:`check_torchvision` turns that into one line naming both versions and the matching
pair to install. torchvision ``0.N`` is built for torch ``2.(N - 15)`` (torch 2.5 and torchvision 0.20).
"""

from __future__ import annotations

import importlib
from importlib import metadata
from types import ModuleType

from vlbias.errors import ConfigError

#: torchvision's minor version minus torch's, for torch 2.x (torch 2.0 with torchvision 0.15, 2.14 with 0.29).
MINOR_OFFSET = 15


def import_torchvision(module: str = "torchvision") -> ModuleType:
    """``module`` (torchvision or one of its modules), imported; if torchvision was built for another torch, a
    :class:`~vlbias.errors.ConfigError` with one line naming the two versions and how to install a matching pair.
    Any other failure is left as it is."""
    try:
        return importlib.import_module(module)
    except RuntimeError as err:
        mismatch = torchvision_mismatch(err)
        if mismatch is None:
            raise
        raise mismatch from None


def torchvision_mismatch(error: BaseException) -> ConfigError | None:
    """The :class:`~vlbias.errors.ConfigError` of :func:`mismatch_message` when ``error`` is torchvision failing to
    register its operators (``operator torchvision::nms does not exist``), else ``None``; the command line asks it
    of any error, so that a torchvision reached first through another library is one line too."""
    if not isinstance(error, RuntimeError) or "torchvision::" not in str(error):
        return None
    return ConfigError(mismatch_message(str(error).splitlines()[0]))


def mismatch_message(error: str) -> str:
    """The one line for a torchvision that does not match torch (``error``: torchvision's own first line).

    Example:
        >>> "do not match" in mismatch_message("operator torchvision::nms does not exist")
        True
    """
    torch, torchvision = _version("torch"), _version("torchvision")
    release = torch.split("+")[0]
    parts = release.split(".")
    if len(parts) >= 2 and parts[0] == "2" and parts[1].isdigit():
        pair = f"`pip install 'torch=={release}' 'torchvision==0.{int(parts[1]) + MINOR_OFFSET}.*'`"
    else:
        pair = "the pair listed at https://github.com/pytorch/vision#installation"
    return (
        f"torch {torch} and torchvision {torchvision} do not match (torchvision was built for another torch: "
        f"{error}); install the torchvision built for this torch, from the same index (CPU or the same CUDA): "
        f"{pair}, or reinstall both together"
    )


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(not installed)"

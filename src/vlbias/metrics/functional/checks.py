r"""Argument checks shared by the functional metrics, the metric classes and the code that feeds them embeddings.

One check per kind of argument, with one message, and one error class per kind of mistake (both are
``ValueError`` subclasses from :mod:`vlbias.errors`, which the console script prints as one line):

* an **option** of a metric out of range or of the wrong type (a count such as ``n_bootstrap``, a coverage, an
  interval method, a cut-off): a programming or configuration error, fixed where the metric is built or the
  function is called, so :class:`~vlbias.errors.ConfigError`;
* the **data** a metric is given (embeddings, scores): :class:`~vlbias.errors.InputError`.

Messages read as torchmetrics' do: "Expected argument `x` to be ... but got ...".

Example:
    >>> check_bootstrap(1000, 0.95)
    >>> check_bootstrap(1000, 95)
    Traceback (most recent call last):
    ...
    vlbias.errors.ConfigError: Expected argument `confidence` to be in (0, 1) but got 95
    >>> check_int("top_k", 3, high=2, none_allowed=True, high_is="the smaller attribute set")
    Traceback (most recent call last):
    ...
    vlbias.errors.ConfigError: Expected argument `top_k` to be an integer in [1, 2] or None (the smaller attribute set) but got 3
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.bootstrap import INTERVAL_METHODS


def shape_or_type(value: object) -> tuple[int, ...] | str:
    """What an error message shows of an argument: a tensor's shape, or the name of another object's type."""
    return tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__


# ----------------------------------------------------------------------------- options: ConfigError
def check_int(
    name: str,
    value: object,
    low: int = 1,
    high: int | None = None,
    *,
    none_allowed: bool = False,
    high_is: str = "",
) -> None:
    """Raise a :class:`~vlbias.errors.ConfigError` naming argument ``name`` unless ``value`` is an integer (not a
    bool) in ``[low, high]`` (no upper bound when ``high`` is None), or None when ``none_allowed``; ``high_is`` says
    in the message what the upper bound is."""
    if none_allowed and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        if high is not None:
            expected = f"an integer in [{low}, {high}]"
        else:
            expected = {1: "a positive integer", 0: "a non-negative integer"}.get(low, f"an integer >= {low}")
        expected += " or None" if none_allowed else ""
        expected += f" ({high_is})" if high_is else ""
        raise ConfigError(f"Expected argument `{name}` to be {expected} but got {value!r}")


def check_confidence(confidence: object) -> None:
    """Raise a :class:`~vlbias.errors.ConfigError` unless the coverage ``confidence`` is a real number in (0, 1)."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ConfigError(f"Expected argument `confidence` to be in (0, 1) but got {confidence!r}")


def check_names(name: str, names: Sequence[str]) -> None:
    """Raise a :class:`~vlbias.errors.ConfigError` naming argument ``name`` unless ``names`` are distinct and at
    least one (a metric's categories)."""
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"Expected argument `{name}` to be distinct names but got {list(names)!r}.")


def check_bootstrap(n_bootstrap: object, confidence: object) -> None:
    """The options of every bootstrap interval: ``n_bootstrap`` a positive integer (:func:`check_int`) and
    ``confidence`` in (0, 1) (:func:`check_confidence`)."""
    check_int("n_bootstrap", n_bootstrap)
    check_confidence(confidence)


def check_interval_method(method: object, name: str = "method") -> None:
    """Raise a :class:`~vlbias.errors.ConfigError` naming argument ``name`` unless ``method`` is one of
    :data:`~vlbias.metrics.functional.bootstrap.INTERVAL_METHODS`."""
    if method not in INTERVAL_METHODS:
        raise ConfigError(f"Expected argument `{name}` to be one of {INTERVAL_METHODS} but got {method!r}")


# ----------------------------------------------------------------------------- data: InputError
def check_embeddings(name: str, embeddings: Tensor) -> Tensor:
    """``embeddings`` unchanged, or an :class:`~vlbias.errors.InputError` naming the set unless it is a non-empty
    2-D ``(items, dim)`` floating-point tensor of finite, nonzero rows (a cosine needs a direction)."""
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
        raise InputError(
            f"Expected argument `{name}` to be a 2-D tensor (items, dim) but got {shape_or_type(embeddings)}"
        )
    if embeddings.shape[0] == 0:
        raise InputError(f"Expected argument `{name}` to hold at least one embedding but the set `{name}` is empty")
    if not embeddings.is_floating_point():
        raise InputError(f"Expected argument `{name}` to be a floating-point tensor but got {embeddings.dtype}")
    bad_rows = int((~torch.isfinite(embeddings)).any(dim=1).sum())
    if bad_rows:
        raise InputError(
            f"Expected finite embeddings in `{name}` but {bad_rows} of its {embeddings.shape[0]} rows hold NaN or inf"
        )
    zero_rows = int((torch.linalg.vector_norm(embeddings, dim=1) == 0).sum())
    if zero_rows:
        raise InputError(
            f"Expected nonzero embeddings in `{name}` (cosine needs a direction) but {zero_rows} of its "
            f"{embeddings.shape[0]} rows are all zeros"
        )
    return embeddings


def check_same_dim(**sets: Tensor) -> None:
    """Raise an :class:`~vlbias.errors.InputError` listing each set's dimension unless all are equal."""
    dims = {name: embeddings.shape[1] for name, embeddings in sets.items()}
    if len(set(dims.values())) > 1:
        listed = ", ".join(f"`{name}`: {dim}" for name, dim in dims.items())
        raise InputError(f"Expected all embeddings to have the same dimension but got {listed}")


def check_scores(name: str, scores: Tensor) -> Tensor:
    """``scores`` unchanged, or an :class:`~vlbias.errors.InputError` unless it is a non-empty 1-D tensor of finite
    association scores."""
    if not isinstance(scores, Tensor) or scores.ndim != 1 or scores.numel() == 0:
        raise InputError(
            f"Expected argument `{name}` to be a non-empty 1-D tensor of association scores but got "
            f"{shape_or_type(scores)}"
        )
    bad = int((~torch.isfinite(scores)).sum())
    if bad:
        raise InputError(f"Expected finite association scores in `{name}` but {bad} of {scores.numel()} are NaN or inf")
    return scores


def check_score_matrix(name: str, scores: Tensor) -> Tensor:
    """``scores`` unchanged, or an :class:`~vlbias.errors.InputError` unless it is a 2-D floating-point tensor
    without NaN (query-gallery scores; ``-inf`` marks a candidate left out)."""
    if not isinstance(scores, Tensor) or scores.ndim != 2 or not scores.is_floating_point():
        raise InputError(
            f"Expected argument `{name}` to be a 2-D floating-point tensor but got {shape_or_type(scores)}"
        )
    if bool(scores.isnan().any()):
        raise InputError(f"Expected argument `{name}` to hold no NaN but got {int(scores.isnan().sum())}")
    return scores

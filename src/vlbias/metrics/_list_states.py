"""Typed empty ``"cat"`` list states for the DDP gather, and list states read as one tensor.

torchmetrics' ``Metric._sync_dist`` stands in for an empty list state (a rank that received no data)
with ``torch.tensor([], dtype=self.dtype)``: 1-D and float32 by default. Gathered with another
rank's float64, bool or int64 rows, or rows of shape ``(N, 3)``, it breaks the collective (gloo:
"Received data size doesn't match expected size") or the concatenation, so each state is given an
empty tensor of its own dtype and trailing shape before the sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor
from torchmetrics.utilities.data import dim_zero_cat

from vlbias.errors import InputError


class TypedListStates:
    """Mixin for a :class:`torchmetrics.Metric` (put it first in the bases): ``list_state_specs`` names each
    ``"cat"`` list state with the dtype and trailing shape of the rows ``update`` appends to it.

    Example:
        >>> from torchmetrics import Metric
        >>> class Rows(TypedListStates, Metric):
        ...     list_state_specs = (("rows", torch.int64, (3,)),)
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.add_state("rows", default=[], dist_reduce_fx="cat")
        ...     def update(self, rows):
        ...         self.rows.append(rows.long())
        ...     def compute(self):
        ...         return self.rows
        >>> metric = Rows()  # a rank without data; the gather below is a 1-process stand-in
        >>> metric.sync(distributed_available=lambda: True, dist_sync_fn=lambda t, group=None: [t])
        >>> metric.rows.dtype, tuple(metric.rows.shape)
        (torch.int64, (0, 3))
        >>> metric.unsync(); metric.rows  # the local state is left as it was
        []
    """

    list_state_specs: ClassVar[tuple[tuple[str, torch.dtype, tuple[int, ...]], ...]] = ()

    def list_state(self, name: str) -> Tensor:
        """The list state ``name`` as one tensor (:func:`joined`), empty with the dtype and trailing shape of its
        spec when nothing was appended."""
        dtype, shape = next((dtype, shape) for state, dtype, shape in self.list_state_specs if state == name)
        return joined(getattr(self, name), *shape, dtype=dtype)

    def append_rows(self, given: Mapping[str, Tensor]) -> None:
        """Append one batch to every list state: ``given`` holds a tensor per spec, each of the same number of rows
        and the spec's trailing shape, floating point where the spec's dtype is; anything else is refused in one
        line naming the argument."""
        rows = len(next(iter(given.values())))
        for name, dtype, shape in self.list_state_specs:
            values = torch.as_tensor(given[name])
            floats = dtype.is_floating_point
            if tuple(values.shape) != (rows, *shape) or floats != values.is_floating_point():
                raise InputError(
                    f"Expected argument `{name}` of shape {(rows, *shape)} ({'floats' if floats else 'integers'}) "
                    f"but got {values.dtype} {tuple(values.shape)}."
                )
            getattr(self, name).append(values.to(dtype))

    def sync(self, *args: Any, **kwargs: Any) -> None:
        empty = []
        for name, dtype, shape in self.list_state_specs:
            if isinstance(getattr(self, name), list) and not getattr(self, name):
                setattr(self, name, [torch.empty(0, *shape, dtype=dtype, device=self.device)])
                empty.append(name)
        try:
            super().sync(*args, **kwargs)  # type: ignore[misc]
        finally:  # the local state, and the cache that ``unsync`` restores, stay an empty list
            for name in empty:
                if self._is_synced:
                    self._cache[name] = []
                else:
                    setattr(self, name, [])


def joined(state: list[Tensor] | Tensor, *shape: int, dtype: torch.dtype | None = None) -> Tensor:
    """A ``"cat"`` list state as one tensor: its rows concatenated, an empty list as an empty ``(0, *shape)`` tensor
    of ``dtype`` (the default dtype when None); after a sync it already is one tensor.

    Example:
        >>> joined([torch.tensor([1, 2]), torch.tensor([3])]), joined([], 3, dtype=torch.int64).shape
        (tensor([1, 2, 3]), torch.Size([0, 3]))
    """
    if isinstance(state, Tensor):
        return state
    return dim_zero_cat(state) if state else torch.empty(0, *shape, dtype=dtype)

"""Typed empty ``"cat"`` list states for the DDP gather.

torchmetrics' ``Metric._sync_dist`` stands in for an empty list state (a rank that received no data)
with ``torch.tensor([], dtype=self.dtype)``: 1-D and float32 by default. Gathered with another
rank's float64, bool or int64 rows, or rows of shape ``(N, 3)``, it breaks the collective (gloo:
"Received data size doesn't match expected size") or the concatenation, so each state is given an
empty tensor of its own dtype and trailing shape before the sync.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch


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

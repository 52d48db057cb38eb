"""A table of names -> classes, each imported only when its name is asked for (so listing the models or the
suites, or loading CLIP, imports nothing else). The model catalog and the suite registry are such tables."""

from __future__ import annotations

import importlib

from vlbias.errors import ConfigError


class LazyTable:
    """``entries`` maps each name to ``"module:Class"``; ``kind`` names what the table holds in errors.

    Example:
        >>> table = LazyTable("collection", {"ordered": "collections:OrderedDict"})
        >>> table.names(), table.get("ordered").__name__
        (['ordered'], 'OrderedDict')
    """

    def __init__(self, kind: str, entries: dict[str, str]) -> None:
        self.kind, self.entries = kind, entries

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self.entries)

    def get(self, name: str) -> type:
        """The class registered as ``name``; an unknown name is refused with the known ones."""
        if name not in self.entries:
            raise ConfigError(f"Unknown {self.kind} {name!r}; expected one of: {', '.join(self.names())}.")
        module_name, class_name = self.entries[name].split(":")
        return getattr(importlib.import_module(module_name), class_name)

"""A table of names -> classes, each imported only when its name is asked for (so listing the models or the
suites, or loading CLIP, imports nothing else). The model catalog and the suite registry are such tables. A name
that is not in a table is refused in one line with the known ones and the closest (:func:`refuse_unknown`), so a
command refuses a misspelt ``--suite``, ``--model`` or ``--method`` before torch is imported."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Sequence

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
        refuse_unknown(self.kind, name, self.names())
        module_name, class_name = self.entries[name].split(":")
        return getattr(importlib.import_module(module_name), class_name)


def refuse_unknown(kind: str, name: str, known: Sequence[str]) -> None:
    """Refuse ``name`` unless it is one of ``known``: one :class:`ConfigError` line with the known names and the
    closest of them (:func:`difflib.get_close_matches`).

    Example:
        >>> refuse_unknown("suite", "mmbiass", ["mmbias", "weat"])
        Traceback (most recent call last):
        vlbias.errors.ConfigError: Unknown suite 'mmbiass'; expected one of: mmbias, weat; did you mean 'mmbias'?
    """
    if name in known:
        return
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    raise ConfigError(f"Unknown {kind} {name!r}; expected one of: {', '.join(known)}{hint}")

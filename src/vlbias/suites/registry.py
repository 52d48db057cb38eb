"""Suite names -> suite classes."""

from __future__ import annotations

import importlib

from vlbias.errors import ConfigError
from vlbias.suites.base import Suite

# name -> "module:Class"; one line per suite.
_SUITES: dict[str, str] = {
    "mmbias": "vlbias.suites.mmbias:MMBiasSuite",
    "counterbias": "vlbias.suites.counterbias:CounterBiasSuite",
    "vlstereoset": "vlbias.suites.vlstereoset:VLStereoSetSuite",
    "weat": "vlbias.suites.weat:WEATSuite",
    "entity_association": "vlbias.suites.entity_association:EntityAssociationSuite",
}


def list_suites() -> list[str]:
    return sorted(_SUITES)


def suite_class(name: str) -> type[Suite]:
    if name not in _SUITES:
        raise ConfigError(f"Unknown suite {name!r}; expected one of: {', '.join(list_suites())}.")
    module_name, class_name = _SUITES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)

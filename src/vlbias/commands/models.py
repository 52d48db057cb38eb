"""``vlbias models``: the model adapters and their capabilities (imports no torch)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from jsonargparse import ArgumentParser

from vlbias.commands.parsing import bare_flags, parse


def parser() -> ArgumentParser:
    command = ArgumentParser(
        prog="vlbias models",
        description="List the model adapters and their capabilities.",
        exit_on_error=False,
        allow_abbrev=False,
    )
    command.add_argument("--json", type=bool, default=False, help="Print JSON instead of a table.")
    bare_flags(command)
    return command


def main(argv: Sequence[str]) -> None:
    from vlbias.models.catalog import describe_models

    as_json = parse(parser(), argv)["json"]
    models = describe_models()
    if as_json:
        print(json.dumps(models))
        return
    for model in models:
        print(f"{model['name']:<14} {', '.join(model['capabilities'])}")

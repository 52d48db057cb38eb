"""A function of this package run from a command line: its parameters are the options.

Each script in ``scripts/`` is ``run(function)``. :func:`parser_for` declares one ``--name`` option per parameter
of ``function``: typed by its annotation (jsonargparse checks each value: numbers, ``Literal`` choices, paths),
defaulting to its default, and described by the parameter's line under ``Args:`` in the function's docstring, so an
option is written once, in the function that uses it. A sequence parameter takes one or more values
(``--seeds 0 1 2``, as a table's seeds are written, where a ``vlbias`` command takes a list as ``'[0, 1, 2]'``); a
``bool`` parameter is a flag as in every ``vlbias`` command (``--levels_only``, or ``--levels_only false``). The
parser is the commands' own (:func:`vlbias.commands.parsing.new_parser`), and a refusal reads as a ``vlbias``
command's (:func:`vlbias.commands.argument_errors.one_line`).
"""

from __future__ import annotations

import collections.abc
import inspect
import sys
import types
import typing
from argparse import ArgumentError
from collections.abc import Callable, Sequence
from pathlib import Path

import docstring_parser
from jsonargparse import ArgumentParser

from vlbias.commands.argument_errors import one_line
from vlbias.commands.parsing import bare_flags, new_parser
from vlbias.errors import VlbiasError
from vlbias.renamed import renamed_hint

_SEQUENCES = (list, tuple, collections.abc.Sequence)


def _sequence_item(hint) -> object | None:
    """The item type of a sequence annotation (``list[int]``, ``Sequence[str] | None``), else ``None``.

    Example:
        >>> _sequence_item(Sequence[int] | None), _sequence_item(float | None)
        (<class 'int'>, None)
    """
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    members = [member for member in typing.get_args(hint) if member is not type(None)] if union else [hint]
    if len(members) == 1 and typing.get_origin(members[0]) in _SEQUENCES:
        return typing.get_args(members[0])[0]  # tuple[int, ...] -> int
    return None


def parser_for(function: Callable, prog: str | None = None) -> ArgumentParser:
    """The command line of ``function`` (module docstring): its docstring's first line as the description, one
    option per parameter. A parameter without an ``Args:`` line is a mistake of the function's author: ``TypeError``.

    Example:
        >>> def table(seeds: Sequence[int] = (0, 1), strength: float = 0.9, quiet: bool = False) -> None:
        ...     '''A table.
        ...
        ...     Args:
        ...         seeds: Seeds to run.
        ...         strength: BiasWorld's bias strength.
        ...         quiet: Print nothing.
        ...     '''
        >>> vars(parser_for(table).parse_args(["--seeds", "3", "4", "--quiet"]))
        {'seeds': [3, 4], 'strength': 0.9, 'quiet': True}
    """
    docstring = docstring_parser.parse(inspect.getdoc(function) or "")
    described = {param.arg_name: " ".join(param.description.split()) for param in docstring.params}
    hints = typing.get_type_hints(function)
    parser = new_parser(prog, docstring.short_description)
    for name, parameter in inspect.signature(function).parameters.items():
        if not described.get(name):
            raise TypeError(f"{function.__qualname__}: parameter `{name}` has no line under `Args:` to be its help.")
        options: dict = {"help": described[name]}
        if parameter.default is parameter.empty:
            options["required"] = True
        else:  # a tuple default (an immutable default) is shown and passed on as the list a command line gives
            options["default"] = list(parameter.default) if isinstance(parameter.default, tuple) else parameter.default
        hint, item = hints[name], _sequence_item(hints[name])
        if item is not None:
            parser.add_argument(f"--{name}", type=item, nargs="+", **options)
        else:
            parser.add_argument(f"--{name}", type=hint, **options)
    bare_flags(parser)
    return parser


def _refuse_renamed(parser: ArgumentParser, function: Callable, argv: Sequence[str]) -> None:
    """An option ``function`` once had under another name (:data:`vlbias.renamed.RENAMED`, keyed
    ``<function>.<option>``), or a flag's old ``--no_<flag>``, is refused with one line naming what to write."""
    for token in argv:
        key = token[2:].partition("=")[0] if token.startswith("--") else None
        unknown = key and f"--{key}" not in parser._option_string_actions  # argparse's table of the options
        if unknown and key.startswith("no_") and f"--{key[3:]}" in parser._option_string_actions:
            parser.exit(2, f"{parser.prog}: error: --{key} is now written --{key[3:]} false.\n")  # the old flags
        new = renamed_hint(f"{function.__name__}.{key}") if unknown else None
        if new is not None:
            parser.exit(2, f"{parser.prog}: error: --{key} was renamed; write --{new.rpartition('.')[2]}.\n")


def run(function: Callable, argv: Sequence[str] | None = None):
    """Call ``function`` with the options of ``argv`` (default: this process's command line) and return what it
    returns. A refused option, or bad input the function refuses (a :class:`~vlbias.errors.VlbiasError`), ends in
    one ``<script>: error: ...`` line and exit status 2."""
    parser = parser_for(function, prog=Path(sys.argv[0]).name)
    argv = list(sys.argv[1:] if argv is None else argv)
    _refuse_renamed(parser, function, argv)
    try:
        options = parser.parse_args(argv).as_dict()
    except ArgumentError as error:  # jsonargparse's refusal, in one line as every vlbias command gives it
        parser.exit(2, f"{parser.prog}: error: {one_line(parser, error)}\n")
    try:
        return function(**options)
    except VlbiasError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")

"""Command lines built from the dataclass a command takes: each field is one ``--option``, its ``Args:`` docstring
line is the help text, its type checks the value, and a refusal is one :class:`~vlbias.errors.ConfigError` line
(:mod:`vlbias.commands.argument_errors`). No abbreviations of long options; ``--config FILE`` reads any of the
options from YAML (the last one wins); a ``bool`` option is a bare flag (``--tiny``) that also takes a value
(``--tiny false``). This module imports no torch.
"""

from __future__ import annotations

from argparse import ArgumentError, RawDescriptionHelpFormatter
from collections.abc import Sequence
from typing import TypeVar

import docstring_parser
from jsonargparse import ActionConfigFile, ArgumentParser, DefaultHelpFormatter, Namespace

from vlbias.commands.argument_errors import one_line
from vlbias.errors import ConfigError

Options = TypeVar("Options")


class HelpFormatter(RawDescriptionHelpFormatter, DefaultHelpFormatter):
    """jsonargparse's help, with the description and epilog laid out as written."""


def new_parser(prog: str | None, description: str | None, epilog: str | None = None) -> ArgumentParser:
    """An empty parser as every ``vlbias`` command and script has it: no abbreviations of long options, the
    description and epilog laid out as written, and a refused argument raised (not printed) so that it ends as one
    line (:func:`parse_namespace`)."""
    return ArgumentParser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=HelpFormatter,
        exit_on_error=False,
        allow_abbrev=False,
    )


def options_parser(options: type, prog: str, epilog: str | None = None) -> ArgumentParser:
    """The parser of ``prog``, one ``--option`` per field of the dataclass ``options`` (nested dataclasses give
    ``--group.option``); the description is the first paragraph of its docstring."""
    description = docstring_parser.parse(options.__doc__ or "").short_description or ""
    long = docstring_parser.parse(options.__doc__ or "").long_description
    parser = new_parser(prog, f"{description}\n\n{long}".strip() if long else description, epilog)
    parser.add_argument("--config", action=ActionConfigFile, help="YAML with any of these options.")
    parser.add_class_arguments(options, as_group=False, sub_configs=True, fail_untyped=True)
    bare_flags(parser)
    return parser


def bare_flags(parser: ArgumentParser) -> None:
    """Let every ``bool`` option stand alone (``--tiny`` means ``--tiny true``)."""
    for action in parser._actions:
        if getattr(action, "_typehint", None) is bool:
            action.nargs, action.const = "?", True


def parse_namespace(parser: ArgumentParser, argv: Sequence[str]) -> Namespace:
    """``argv`` parsed by ``parser`` (``--help`` answers and exits here); a refused argument is one
    :class:`ConfigError` line prefixed with the command's name."""
    try:
        return parser.parse_args(list(argv))
    except ArgumentError as err:
        raise ConfigError(f"{parser.prog}: {one_line(parser, err)}") from None


def parse(parser: ArgumentParser, argv: Sequence[str]) -> dict:
    """``argv`` parsed by ``parser`` (:func:`parse_namespace`), its nested groups instantiated."""
    return instantiated(parser, parse_namespace(parser, argv))


def instantiated(parser: ArgumentParser, namespace: Namespace) -> dict:
    """The values of ``namespace`` with its nested groups instantiated, without ``--config``."""
    values = parser.instantiate(namespace).as_dict()
    values.pop("config", None)
    return values


def parse_options(options: type[Options], parser: ArgumentParser, argv: Sequence[str]) -> Options:
    """``argv`` as an ``options`` object (its own cross-field checks run as it is made)."""
    return options(**parse(parser, argv))

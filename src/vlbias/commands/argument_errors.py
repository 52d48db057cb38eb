"""jsonargparse's refusals as one line: the option, the value and what is accepted, the closest names of a misspelt
option, the new name of a renamed one (:mod:`vlbias.renamed`), the closest files of a missing config file.

jsonargparse reports a refusal over several lines (``Parser key "seed": Not of type Seed: -1 does not conform
...``; a subclass's refusal nested under ``Does not validate against any of the Union subtypes``). Every
``vlbias`` command, LightningCLI's included, passes them through :func:`one_line`, so a user reads the same
sentence whichever command refused the input. This module imports no torch.
"""

from __future__ import annotations

import difflib
import importlib
import re
from argparse import ArgumentError
from pathlib import Path

from jsonargparse import ActionConfigFile, ArgumentParser

from vlbias.options import describe
from vlbias.renamed import RENAMED, renamed_hint

_KEY = re.compile(r'Parser key "([^"]+)"')
_VALUE = re.compile(
    r"Given value: (.*)$|Got value: (.*)$|Not of type \w+: (.+?) does not conform|Not of type \w+: [^:\n]*: (.+)$", re.M
)
_CLASS_PATH = re.compile(r"Problem with given class_path '([^']+)'")
_NOT_ACCEPTED = re.compile(r"Option '([^']+)' is not accepted|Key \"([^\"]+)\" is not expected")
_UNRECOGNISED = re.compile(r"unrecognized arguments: (--[^\s=]+)")
_NOT_ACCEPTED_IN_CONFIG = re.compile(
    r"does not accept option '([^']+)'|Key \"([^\"]+)\" is not expected|Option '([^']+)' is not accepted"
)
_MISSING_FILE = re.compile(r"File does not exist: '([^']+)'")
_REQUIRED = re.compile(r"the following arguments are required: (.+)$|Key \"([^\"]+)\" is required")


def one_line(parser: ArgumentParser, error: ArgumentError | Exception) -> str:
    """``error`` (raised by ``parser``) as one sentence (module docstring); an error of an unknown form with its
    lines joined.

    Example:
        >>> from jsonargparse import ActionConfigFile, ArgumentParser
        >>> parser = ArgumentParser(exit_on_error=False, allow_abbrev=False)
        >>> _ = parser.add_argument("--max_epochs", type=int)
        >>> try:
        ...     parser.parse_args(["--max_epoch", "3"])
        ... except Exception as err:
        ...     print(one_line(parser, err))
        Unknown option `--max_epoch`; did you mean `--max_epochs`?
    """
    message = str(error)
    moved = next((old for old in RENAMED if old.startswith("vlbias.") and f"'{old}'" in message), None)
    if moved is not None:  # a class path that moved, wherever it is given (a strategy's init_args among them)
        return f"Class path `{moved}` was renamed: write `{RENAMED[moved]}` instead."
    class_path = _CLASS_PATH.search(message)
    if class_path is not None:
        return _subclass_error(message, class_path.group(1))
    for pattern, answer in (
        (_MISSING_FILE, _missing_file),
        (_UNRECOGNISED, lambda key: _unknown(f"--{key.lstrip('-')}", _option_names(parser), "option")),
        (_NOT_ACCEPTED_IN_CONFIG, lambda key: _unknown(key, _config_keys(parser), "key")),
        (_REQUIRED, lambda names: f"Missing required option(s): {_flags(names)}."),
    ):
        found = pattern.search(message)
        if found is not None:
            return answer(next(group for group in found.groups() if group is not None))
    key = _KEY.match(message)
    if key is not None:
        return _bad_value(parser, key.group(1), message)
    return " ".join(message.split())


def _bad_value(parser: ArgumentParser, key: str, message: str) -> str:
    """``Expected option `--key` to be <type> but got <value>.``"""
    action = parser._option_string_actions.get(f"--{key}")
    kind = getattr(action, "_typehint", None) or getattr(action, "type", None)
    value = _VALUE.search(message)
    if kind is None or value is None:
        return f"Option `--{key}`: " + " ".join(message.split("\n", 1)[-1].split())
    got = next(group for group in value.groups() if group is not None)
    return f"Expected option `--{key}` to be {describe(kind)} but got {got}."


def _subclass_error(message: str, class_path: str) -> str:
    """A refusal inside ``class_path``'s ``init_args``: an unknown key, or a value of the wrong type."""
    base = "model" if message.startswith('Parser key "model"') else "data"
    prefix = f"{base}.init_args" if _KEY.match(message) else "init_args"
    unknown = _NOT_ACCEPTED.search(message)
    if unknown is not None:
        key = next(group for group in unknown.groups() if group is not None)
        hint = renamed_hint(f"{prefix}.{key}")
        if hint is not None:
            return f"Option `{prefix}.{key}` was renamed: write `{hint}` instead."
        accepted = _init_args(class_path)
        close = difflib.get_close_matches(key, accepted, n=3, cutoff=0.6)
        suggestion = f"; did you mean {' or '.join(f'`{name}`' for name in close)}?" if close else "."
        listed = f" Accepted: {', '.join(accepted)}." if accepted else f" {class_path} takes no options."
        return f"Unknown option `{prefix}.{key}` of {class_path}{suggestion}{listed}"
    inner = _KEY.findall(message)
    value = _VALUE.search(message)
    if len(inner) >= 2 and value is not None:
        got = next(group for group in value.groups() if group is not None)
        expected = re.search(r"Expected a (.+?)\. Got value|Not of type (\w+)", message)
        what = next((g for g in expected.groups() if g), "another value") if expected else "another value"
        return f"Expected option `{prefix}.{inner[-1]}` of {class_path} to be {what} but got {got}."
    return f"{class_path}: " + " ".join(message.split())


def _init_args(class_path: str) -> list[str]:
    """The options ``class_path``'s constructor accepts, as jsonargparse reads them (inherited ones included)."""
    module_name, _, class_name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        return []
    parser = ArgumentParser()
    parser.add_class_arguments(cls, fail_untyped=False, sub_configs=True)
    return list(dict.fromkeys(key.split(".")[0] for key in parser.get_defaults().keys()))


def _unknown(key: str, known: list[str], what: str) -> str:
    hint = renamed_hint(key.lstrip("-"))
    if hint is not None:
        return f"Option `{key}` was renamed: write `{hint}` instead."
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    suggestion = f"; did you mean {' or '.join(f'`{name}`' for name in close)}?" if close else "."
    return f"Unknown {what} `{key}`{suggestion}"


def _option_names(parser: ArgumentParser) -> list[str]:
    """The parser's options that hold a value (not ``--help``, ``--print_config`` or a config-file option)."""
    return [
        name
        for name, action in parser._option_string_actions.items()
        if name.startswith("--")
        and action.dest not in ("help", "print_config")
        and not isinstance(action, ActionConfigFile)
    ]


def _config_keys(parser: ArgumentParser) -> list[str]:
    return [name.removeprefix("--") for name in _option_names(parser)]


def _missing_file(path: str) -> str:
    """A config file that does not exist, with the closest names in its folder."""
    folder = Path(path).parent
    names = [entry.name for entry in folder.iterdir()] if folder.is_dir() else []
    close = difflib.get_close_matches(Path(path).name, names, n=3, cutoff=0.6)
    suggestion = f"; did you mean {' or '.join(repr(str(folder / name)) for name in close)}?" if close else "."
    return f"Config file {path!r} does not exist{suggestion}"


def _flags(names: str) -> str:
    return ", ".join(f"--{name.strip()}" for name in names.split(","))

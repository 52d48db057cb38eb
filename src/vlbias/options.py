"""Options checked at the door: a mapping of options (``--suite_options``, ``--model_options``, an attack's
options) validated against the typed signature that declares them, before any data or model is loaded; and the
declarations shared by several layers (:class:`StatisticsOptions`, the restricted numbers below).

A declaration is a class or function whose parameters carry precise types (``jsonargparse.typing``'s
``PositiveInt``, ``OpenUnitInterval``, :func:`~jsonargparse.typing.restricted_number_type`, ``Literal[...]``);
jsonargparse checks each value against its type. A refusal is one :class:`~vlbias.errors.ConfigError` line
naming the option, the value and what is accepted; a misspelt name gets the closest accepted names.
This module imports no torch, so ``--help`` and the checks cost nothing.
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from argparse import ArgumentError
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from jsonargparse import ArgumentParser
from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt, restricted_number_type

from vlbias.errors import ConfigError

# jsonargparse registers each restriction once, under one name: declare shared ones here, not again elsewhere.
#: A seed for Python's, NumPy's and torch's generators: NumPy takes [0, 2**32 - 1].
Seed = restricted_number_type("Seed", int, [(">=", 0), ("<=", 2**32 - 1)])
#: A number in (0, 1]: a difference of probabilities, a step or bound in [0, 1] pixel space.
PositiveUnitInterval = restricted_number_type("PositiveUnitInterval", float, [(">", 0.0), ("<=", 1.0)])
#: A dropout probability, in [0, 1).
DropoutRate = restricted_number_type("DropoutRate", float, [(">=", 0.0), ("<", 1.0)])
#: Bootstrap interval methods (:mod:`vlbias.metrics.functional.bootstrap`: percentile and BCa).
IntervalMethod = Literal["percentile", "bca"]
#: The names of the ranking protocols, the keys of :data:`vlbias.metrics.ranking_protocols.PROTOCOLS` (which checks,
#: when imported, that its table holds exactly these): declared here, without torch, for the suites' options.
RankingProtocolName = Literal["geyik", "debiasclip", "bendvlm", "sfid"]


@dataclass(frozen=True)
class StatisticsOptions:
    """The settings of a run's permutation tests and bootstrap intervals, shared by every suite and the metrics.

    Each suite's options hold one as ``statistics`` with that suite's defaults (``--suite_options '{statistics:
    {n_bootstrap: 200}}'`` changes one field and keeps the suite's other defaults); a suite passes the fields to its
    metrics' keyword arguments of the same names. A field a suite does not use is refused by name when set away
    from that suite's default (:class:`vlbias.suites.options.SuiteOptions`).

    Randomness is no option here: every permutation test and bootstrap of a run draws from a ``torch.Generator``
    seeded with the run's ``seed`` (``vlbias measure --seed``, the callback's ``seed``; see each metric for the
    offsets it adds), and CounterBias's image attack starts from ``seed`` too.

    Args:
        n_permutations: random re-arrangements drawn for a p-value when the permutation test is not exact.
        exact_limit: most re-partitions of X ∪ Y a permutation test counts exactly rather than sampling (0: always
            sample).
        n_bootstrap: bootstrap resamples per interval.
        confidence: interval coverage.
        interval_method: bootstrap interval: percentile, or bca (bias-corrected and accelerated; closer to nominal
            coverage at small sets).
    """

    n_permutations: PositiveInt = 10_000
    exact_limit: NonNegativeInt = 10**9
    n_bootstrap: PositiveInt = 1_000
    confidence: OpenUnitInterval = 0.95
    interval_method: IntervalMethod = "percentile"


#: The default statistics, the one place each default is written: every metric's keyword defaults
#: (``n_bootstrap=DEFAULT_STATISTICS.n_bootstrap``, ...) read it, and each suite starts from it.
DEFAULT_STATISTICS = StatisticsOptions()


def check_options(
    options: dict | None, declaration: Callable, what: str, skip: Iterable[str] = (), method: str | None = None
) -> dict:
    """``options`` checked against the parameters of ``declaration`` (a class, or its ``method``, or a function)
    other than ``skip``; returns them with each value converted to its declared type. ``what`` names the
    options in errors (``"suite 'weat' option"``).

    Example:
        >>> from jsonargparse.typing import PositiveInt
        >>> def draw(count: PositiveInt = 1) -> None: ...
        >>> check_options({"count": "3"}, draw, "draw option")
        {'count': 3}
        >>> check_options({"counts": 3}, draw, "draw option")
        Traceback (most recent call last):
        vlbias.errors.ConfigError: Unknown draw option `counts`; did you mean `count`? Accepted: count.
        >>> check_options({"count": 0}, draw, "draw option")
        Traceback (most recent call last):
        vlbias.errors.ConfigError: Expected draw option `count` to be an integer v>0 but got 0.
    """
    if not isinstance(options, dict | None):
        raise ConfigError(f"Expected the {what}s as a mapping {{name: value}} but got {options!r}.")
    options = dict(options or {})
    accepted = accepted_types(declaration, skip, method)
    for name in options:
        if name not in accepted:
            close = difflib.get_close_matches(str(name), list(accepted), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else "."
            raise ConfigError(f"Unknown {what} `{name}`{hint} Accepted: {', '.join(accepted) or 'none'}.")
    return {name: check_value(name, value, accepted[name], what) for name, value in options.items()}


def check_value(name: str, value: object, kind: object, what: str) -> object:
    """``value`` of option ``name`` checked against type ``kind`` and converted to it (plain ``int``/``float``,
    not jsonargparse's restricted subclasses); refused with a :class:`ConfigError` naming ``what`` and ``name``.

    Example:
        >>> from jsonargparse.typing import OpenUnitInterval
        >>> check_value("confidence", 1.5, OpenUnitInterval, "suite option")
        Traceback (most recent call last):
        vlbias.errors.ConfigError: Expected suite option `confidence` to be a number v>0 and v<1 but got 1.5.
    """
    if _unchecked(kind):
        return value
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument(f"--{name}", type=kind)
    try:
        return _plain(parser.parse_object({name: value})[name])
    except (ArgumentError, TypeError, ValueError) as err:  # jsonargparse's refusal, or a type's own
        raise ConfigError(f"Expected {what} `{name}` to be {describe(kind)} but got {value!r}.") from err


def accepted_types(declaration: Callable, skip: Iterable[str] = (), method: str | None = None) -> dict[str, object]:
    """``{name: type}`` of the keyword parameters of ``declaration`` (or its ``method``), in order, without
    ``self``/``cls``, ``*args``/``**kwargs`` and ``skip``; an unannotated parameter accepts anything."""
    function = getattr(declaration, method) if method else declaration
    # a class's fields resolved each in the module that declares it (a dataclass's __init__ reads its own module's)
    hints = typing.get_type_hints(function)
    if inspect.isclass(function):
        function = function.__init__
    skip = set(skip)
    return {
        name: hints.get(name, typing.Any)
        for name, parameter in inspect.signature(function).parameters.items()
        if name not in skip | {"self", "cls"}
        and parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }


def _plain(value: object) -> object:
    """``value`` with jsonargparse's restricted numbers (``PositiveInt(3)``) turned back into ``int``/``float``."""
    base = getattr(type(value), "_type", None)
    if base in (int, float):
        return base(value)
    if isinstance(value, list | tuple):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _unchecked(kind: object) -> bool:
    """Whether ``kind`` accepts any value (``Any``, ``object``, or a union with one): such options pass as given."""
    return kind in (typing.Any, object) or any(_unchecked(arg) for arg in typing.get_args(kind))


def describe(kind: object) -> str:
    """What a type accepts, in words: ``PositiveInt`` -> ``"an integer v>0"``, ``Literal["a", "b"]`` ->
    ``"one of 'a', 'b'"``, ``int | None`` -> ``"an integer or null"``.

    Example:
        >>> from jsonargparse.typing import OpenUnitInterval
        >>> describe(OpenUnitInterval | None)
        'a number v>0 and v<1 or null'
    """
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(arg) for arg in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if origin in (list, tuple, typing.Sequence) or (origin is not None and issubclass(origin, Iterable)):
        if origin is dict:
            return "a mapping"
        return f"a list, each {describe(args[0])}" if args else "a list"
    if kind is type(None):
        return "null"
    if kind is bool:
        return "true or false"
    expression = getattr(kind, "_expression", None)
    if expression is not None:  # a jsonargparse restricted number type
        return f"{'an integer' if issubclass(kind, int) else 'a number'} {expression}"
    words = {int: "an integer", float: "a number", str: "a string", dict: "a mapping", list: "a list"}
    return words.get(kind, "anything" if kind is typing.Any else getattr(kind, "__name__", str(kind)))

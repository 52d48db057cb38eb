"""``vlbias measure``: run one bias suite on one model (:func:`vlbias.workflows.measure.measure`)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from jsonargparse import ArgumentParser

from vlbias.commands.parsing import options_parser, parse_options
from vlbias.workflows.options import MeasureOptions

OPTIONS = MeasureOptions  # what the command takes (vlbias.commands.resolve checks a Slurm job's with it)


def parser() -> ArgumentParser:
    """The options of :class:`~vlbias.workflows.options.MeasureOptions`, with every suite's options in the epilog."""
    return options_parser(OPTIONS, "vlbias measure", epilog=_suites_help())


def _suites_help() -> str:
    """Every suite in one line (:func:`vlbias.suites.registry.suite_summaries`), then its options
    (:mod:`vlbias.suites.options`)."""
    from vlbias.suites.options import options_help, suite_options_classes
    from vlbias.suites.registry import suite_summaries

    lines = ["suites (--suite):"]
    lines += [f"  {suite:<20} {summary}" for suite, summary in suite_summaries().items()]
    lines += ["", "suites and their --suite_options (e.g. --suite_options '{statistics: {n_permutations: 2000}}'):"]
    for suite, declaration in suite_options_classes().items():
        lines.append(f"  {suite}: {declaration.__doc__.splitlines()[0].replace('``', '')}")
        for name, text in options_help(declaration):
            lines.append(textwrap.fill(text, 116, initial_indent=f"    {name:<28} ", subsequent_indent=" " * 33))
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    options = parse_options(OPTIONS, parser(), argv)  # --help answers here, before torch is imported
    from vlbias.results import flags_of, is_count, read_results
    from vlbias.workflows.measure import measure

    path = measure(options)
    results = read_results(path)
    for metric, value in results.metrics.items():
        extra = ""
        if metric in results.intervals:
            low, high = results.intervals[metric]
            extra += f" [{number(low)}, {number(high)}]"
        if metric in results.p_values:
            extra += f" p={number(results.p_values[metric], '.4f')}"
        marks = "" if is_count(metric) else ", ".join(dict.fromkeys(f["flag"] for f in flags_of(results, metric)))
        extra += f" (flagged: {marks})" if marks else ""
        print(f"{results.suite}/{metric} = {number(value)}{extra}")
    for flag in results.flags:
        print(f"FLAGGED {flag['flag']} ({flag['metric'] or 'every metric'}): {flag['reason']}")
    print(f"{results.n_items} items measured, {len(results.skipped)} skipped (reasons in {path.name})")
    print(f"wrote {path}")


def number(value: float | None, spec: str = "+.3f") -> str:
    """A result number for the console; ``None`` (a non-finite value in the JSON) prints as nan."""
    return "nan" if value is None else format(value, spec)

"""``vlbias report``: an HTML + Markdown report with figures from results files and logs
(:func:`vlbias.report.build_report`, whose parameters are this command's options)."""

from __future__ import annotations

from collections.abc import Sequence

import docstring_parser
from jsonargparse import ArgumentParser

from vlbias.commands.parsing import HelpFormatter, parse


def parser() -> ArgumentParser:
    from vlbias.report.build import build_report

    docs = {param.arg_name: param.description for param in docstring_parser.parse(build_report.__doc__).params}
    command = ArgumentParser(
        prog="vlbias report",
        description="Write <out>/index.html and <out>/report.md, with PNG figures beside them, from results files "
        "(<suite>.json + items), metrics.csv, prune.json and tradeoff.csv found under the inputs. Recomputes nothing.",
        formatter_class=HelpFormatter,
        exit_on_error=False,
        allow_abbrev=False,
    )
    command.add_argument("inputs", type=str, nargs="+", help=docs["inputs"])
    command.add_function_arguments(build_report, skip={"inputs"}, as_group=False)
    return command


def main(argv: Sequence[str]) -> None:
    values = parse(parser(), argv)
    from vlbias.errors import SchemaError
    from vlbias.report import build_report

    report = build_report(**values)
    print(f"wrote {report.html}, {report.markdown} and {len(report.images)} figures")
    if report.problems:
        reasons = "; ".join(f"{where}: {reason}" for where, reason in report.problems)
        raise SchemaError(f"{len(report.problems)} problem(s) with the inputs, left out of the report: {reasons}")

"""``vlbias audit``: every suite a model allows on every data set found, then the report
(:func:`vlbias.workflows.audit.audit`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from jsonargparse import ArgumentParser

from vlbias.commands.parsing import options_parser, parse_options
from vlbias.workflows.options import AuditOptions

OPTIONS = AuditOptions  # what the command takes (vlbias.commands.resolve checks a Slurm job's with it)


def parser() -> ArgumentParser:
    """The options of :class:`~vlbias.workflows.options.AuditOptions`."""
    return options_parser(OPTIONS, "vlbias audit")


def main(argv: Sequence[str]) -> None:
    options = parse_options(OPTIONS, parser(), argv)
    from vlbias.results import read_results
    from vlbias.workflows.audit import audit

    path = audit(options)
    print(f"{'suite':<20} {'data set':<16} {'status':<15} results file or reason")
    for entry in json.loads(path.read_text())["entries"]:
        outcome = entry["results"] or entry["reason"]
        if entry["results"]:
            flags = read_results(path.parent / entry["results"]).flags
            outcome += "".join(f" (FLAGGED {flag['flag']})" for flag in flags)
        print(f"{entry['suite']:<20} {entry['dataset']:<16} {entry['status']:<15} {outcome}")
    print(f"wrote {path} and {path.parent / 'report' / 'index.html'}")

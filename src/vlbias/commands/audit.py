"""``vlbias audit``: every suite a model allows on every data set found, then the report (:func:`vlbias.audit.audit`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from jsonargparse import ArgumentParser

from vlbias.commands.parsing import options_parser, parse_options
from vlbias.run_options import AuditOptions


def parser() -> ArgumentParser:
    """The options of :class:`~vlbias.run_options.AuditOptions`."""
    return options_parser(AuditOptions, "vlbias audit")


def main(argv: Sequence[str]) -> None:
    options = parse_options(AuditOptions, parser(), argv)
    from vlbias.audit import audit
    from vlbias.results import read_results

    path = audit(options)
    print(f"{'suite':<20} {'data set':<16} {'status':<15} results file or reason")
    for entry in json.loads(path.read_text())["entries"]:
        outcome = entry["results"] or entry["reason"]
        if entry["results"]:
            flags = read_results(path.parent / entry["results"]).flags
            outcome += "".join(f" (FLAGGED {flag['flag']})" for flag in flags)
        print(f"{entry['suite']:<20} {entry['dataset']:<16} {entry['status']:<15} {outcome}")
    print(f"wrote {path} and {path.parent / 'report' / 'index.html'}")

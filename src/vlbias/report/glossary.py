"""What a report says of a suite, read from the one place it is written: the suite module's docstring, whose
``Measures:``, ``Direction:`` and ``Glossary:`` sections (Google-style sections, shown in the API reference too)
say what the suite measures, which sign is bias toward whom, and what every name in its results means.

Suite ``<name>`` is defined in module ``vlbias.suites.<name>`` (a test holds every registered suite to this). The
docstring is read from the module's source, as the API reference reads it, so a report imports no suite (and no
torch). A ``Glossary`` entry is a bullet naming one or more terms, then the definition::

    * ``max_skew@K``: the largest over-representation ...
    * ``S_L``, ``B_L``: language context given the image ...

A metric name *uses* a term when the term's ``/``-separated segments appear, adjacent and in order, among the
name's, a cut-off such as ``@10`` reading ``@K`` and a term segment ``<x>`` standing for any one segment:
``group/woman_stereotyped/max_skew@10`` uses ``max_skew@K``, ``activity/B@V/Sw/O`` uses ``B@V`` and ``Sw/O``.
A name that uses no term has no glossary entry (:func:`undefined`).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

_ENTRY = re.compile(r"^\* ((?:``[^`]+``(?:, )?)+): (.*)$", re.S)
_TERM = re.compile(r"``([^`]+)``")
_CUTOFF = re.compile(r"@\d+$")
_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|math):`~?([^`]+)`")


@dataclass(frozen=True)
class SuiteText:
    """A suite's ``Measures`` and ``Direction`` paragraphs and its ``Glossary`` (the terms of each entry -> their
    definition, in the docstring's order), as plain text."""

    measures: str = ""
    direction: str = ""
    glossary: dict[tuple[str, ...], str] = field(default_factory=dict)


def plain(text: str) -> str:
    """``text`` without reST markup: ````x```` and roles become their text (``:func:`~a.b``` reads ``b``)."""
    text = _ROLE.sub(lambda match: match.group(1).rsplit(".", 1)[-1], text)
    return " ".join(text.replace("``", "").split())


def sections(docstring: str) -> dict[str, list[str]]:
    """The lines (dedented by one level) of each section ``Title:`` of a cleaned docstring, up to the next line
    that is not indented."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in docstring.splitlines():
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", line):
            current = found.setdefault(line[:-1], [])
        elif current is not None and (not line.strip() or line.startswith("    ")):
            current.append(line[4:])
        else:
            current = None
    return found


def glossary_entries(lines: list[str]) -> dict[tuple[str, ...], str]:
    """``{terms: definition}`` of a ``Glossary`` section's bullets (a bullet's continuation lines are indented)."""
    bullets: list[str] = []
    for line in lines:
        if line.startswith("* "):
            bullets.append(line)
        elif bullets and line.strip():
            bullets[-1] += "\n" + line
    entries = {}
    for bullet in bullets:
        match = _ENTRY.match(bullet)
        if match is None:
            raise ValueError(f"Expected a glossary entry '* ``term``: definition' but got {bullet!r}")
        entries[tuple(_TERM.findall(match.group(1)))] = plain(match.group(2))
    return entries


def suite_docstring(suite: str) -> str:
    """The docstring of module ``vlbias.suites.<suite>``, read from its source; ``""`` when there is none."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", suite):
        return ""
    spec = importlib.util.find_spec(f"vlbias.suites.{suite}")
    if spec is None or spec.origin is None:
        return ""
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""


@cache
def suite_text(suite: str) -> SuiteText:
    """What the docstring of ``suite``'s module says (module docstring); empty for a name that is not a suite."""
    found = sections(suite_docstring(suite))
    paragraph = {title: plain("\n".join(found.get(title, []))) for title in ("Measures", "Direction")}
    return SuiteText(paragraph["Measures"], paragraph["Direction"], glossary_entries(found.get("Glossary", [])))


def _segments(name: str) -> list[str]:
    return [_CUTOFF.sub("@K", segment) for segment in name.split("/")]


def uses(name: str, term: str) -> bool:
    """Whether metric ``name`` uses glossary ``term`` (module docstring).

    Example:
        >>> uses("group/woman_stereotyped/max_skew@10", "max_skew@K"), uses("activity/B@V/Sw/O", "Sw/O")
        (True, True)
        >>> uses("activity/B@V-L/avg", "B@V"), uses("zero_shot/man/pleasant_share", "zero_shot/<group>")
        (False, True)
    """
    have, want = _segments(name), term.split("/")
    return any(
        all(w == h or (w.startswith("<") and w.endswith(">")) for w, h in zip(want, have[start:], strict=False))
        for start in range(len(have) - len(want) + 1)
    )


def entries(suite: str, names: list[str]) -> dict[tuple[str, ...], str]:
    """The glossary entries of ``suite`` one of whose terms ``names`` use, in the docstring's order."""
    glossary = suite_text(suite).glossary
    return {terms: text for terms, text in glossary.items() if any(uses(n, t) for n in names for t in terms)}


def undefined(suite: str, names: list[str]) -> list[str]:
    """The ``names`` of ``suite`` that use no glossary term."""
    known = [term for terms in suite_text(suite).glossary for term in terms]
    return [name for name in names if not any(uses(name, term) for term in known)]

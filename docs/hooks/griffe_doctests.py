"""A griffe extension for the API reference: the docstrings' doctests (``>>>`` lines and their output) are shown
as Python console blocks, wherever they stand (an ``Example:`` section or the text), instead of being read as
Markdown, where ``[a](b)`` and ``[a][b]`` in an output would be links."""

from __future__ import annotations

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")


def fence_doctests(text: str) -> str:
    """``text`` with every run of doctest lines (a ``>>>`` line, its ``...`` continuations and its output, up to a
    blank line) between ```` ```pycon ```` fences at the run's indentation."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        match = _PROMPT.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent, run = match.group(1), []
        while i < len(lines) and lines[i].strip():
            run.append(lines[i])
            i += 1
        out += [f"{indent}```pycon", *run, f"{indent}```"]
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence the doctests of every object's docstring (:func:`fence_doctests`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)

"""A griffe extension for the API reference: the docstrings are written for Sphinx-style readers (reST roles such
as ``:func:`x``` and ``.. math::`` blocks) and for doctest; this shows them legibly in Markdown, without changing
them in the source:

* doctests (``>>>`` lines and their output) become Python console blocks, wherever they stand, instead of being
  read as Markdown, where ``[a](b)`` and ``[a][b]`` in an output would be links;
* a ``.. math::`` block becomes a LaTeX code block, so its formula is shown as written;
* a role (``:func:`~a.b```, ``:math:`x```, ...) becomes inline code of its text (``~`` keeps the last name)."""

from __future__ import annotations

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")
_MATH = re.compile(r"^(\s*)\.\. math::\s*(.*)$")
_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|math|ref):`(~?)([^`]+)`")


def _role(match: re.Match) -> str:
    text = match.group(2)
    if match.group(1):  # ~a.b.c shows c
        text = text.rsplit(".", 1)[-1]
    return f"`{text}`"


def readable(text: str) -> str:
    """``text`` with its doctests and ``.. math::`` blocks fenced and its roles made inline code (module docstring)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        prompt, math = _PROMPT.match(lines[i]), _MATH.match(lines[i])
        if prompt:  # a doctest: up to the next blank line
            indent, run = prompt.group(1), []
            while i < len(lines) and lines[i].strip():
                run.append(lines[i])
                i += 1
            out += [f"{indent}```pycon", *run, f"{indent}```"]
        elif math:  # the directive's own line, then its indented block (blank lines inside it kept)
            indent, run = math.group(1), [math.group(2)] if math.group(2) else []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
                run.append(lines[i].strip())
                i += 1
            while run and not run[-1]:
                run.pop()
            out += [f"{indent}```latex", *(f"{indent}{line}" if line else "" for line in run), f"{indent}```", ""]
        else:
            out.append(lines[i])
            i += 1
    return _roles_outside_fences(out)


def _roles_outside_fences(lines: list[str]) -> str:
    """The lines joined, each role outside the fenced blocks made inline code (a role may span a line break)."""
    chunks, prose, fenced = [], [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            chunks.append(_ROLE.sub(_role, "\n".join(prose)) if not fenced else "\n".join(prose))
            prose, fenced = [], not fenced
            chunks.append(line)
        else:
            prose.append(line)
    chunks.append(_ROLE.sub(_role, "\n".join(prose)) if not fenced else "\n".join(prose))
    return "\n".join(chunk for chunk in chunks)


class ReadableDocstrings(griffe.Extension):
    """Make every object's docstring readable in Markdown (:func:`readable`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = readable(obj.docstring.value)

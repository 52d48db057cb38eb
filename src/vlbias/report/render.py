"""Write a report, a list of blocks, as Markdown and as self-contained HTML (images are files beside it;
no scripts, no network)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Text:
    """A paragraph; ``label`` (e.g. ``"Direction:"``), where given, leads it in bold."""

    text: str
    label: str = ""


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    file: str
    alt: str


Block = Heading | Text | Table | Image


@dataclass
class Figures:
    """The PNG files of a report, by file name, in the order they were added."""

    files: dict[str, bytes] = field(default_factory=dict)

    def add(self, stem: str, png: bytes, alt: str) -> Image:
        """Keep ``png`` as ``NN_<stem>.png`` (``stem`` made file-name safe) and return its :class:`Image` block."""
        name = f"{len(self.files):02d}_{re.sub(r'[^A-Za-z0-9._-]+', '_', stem).strip('_')[:80]}.png"
        self.files[name] = png
        return Image(name, alt)


STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f3f3f3}"
    "img{max-width:100%;display:block;margin:.5em 0 1.5em}"
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(blocks: list[Block]) -> str:
    """The report as GitHub-flavoured Markdown."""
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Text):
            out.append(f"**{block.label}** {block.text}" if block.label else block.text)
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(map(_cell, block.headers)) + " |", "|" + " --- |" * len(block.headers)]
            lines += ["| " + " | ".join(map(_cell, row)) + " |" for row in block.rows]
            out.append("\n".join(lines))
        else:
            out.append(f"![{block.alt}]({block.file})")
    return "\n\n".join(out) + "\n"


def page(title: str, blocks: list[Block]) -> str:
    """The report as one HTML page."""
    body = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Text):
            label = f"<strong>{html.escape(block.label)}</strong> " if block.label else ""
            body.append(f"<p>{label}{html.escape(block.text)}</p>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        else:
            body.append(f'<img src="{html.escape(block.file)}" alt="{html.escape(block.alt)}">')
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )

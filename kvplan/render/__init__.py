"""The one place that formats output: sizes, percentages, tables, JSON and Markdown.

Commands build a ``Report`` (sections of rows, plus a JSON payload of raw integers); ``emit`` prints it
as a rich table, Markdown or JSON. Floats exist only here.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TextIO

from kvplan.units import GB, MB, GiB, MiB

SCHEMA_VERSION = 1


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


def gib(n: int) -> str:
    """'52.68 GiB' — binary gibibytes, two decimals."""
    return f"{n / GiB:,.2f} GiB"


def size(n: int) -> str:
    """Both unit systems: '52.68 GiB (56.56 GB)', '64.00 MiB (67.11 MB)'; exact bytes under 1 MiB."""
    if abs(n) < MiB:
        return nbytes(n)
    if abs(n) < GiB:
        return f"{n / MiB:,.2f} MiB ({n / MB:,.2f} MB)"
    return f"{n / GiB:,.2f} GiB ({n / GB:,.2f} GB)"


def nbytes(n: int) -> str:
    """Exact bytes with thousands separators, for per-token figures: '53,940 B'."""
    return f"{n:,} B"


def count(n: int) -> str:
    return f"{n:,}"


def pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f}%" if den else "n/a"


def ppm(n: int) -> str:
    return f"{n / 10_000:.1f}%"


def fraction(x: object) -> str:
    return f"{x}"


@dataclass(frozen=True)
class Section:
    title: str
    rows: tuple[tuple[str, ...], ...]
    headers: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Bar:
    """A one-line memory map: (label, bytes) parts of a whole."""

    title: str
    parts: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Report:
    command: str
    title: str
    sections: tuple[Section, ...]
    data: dict[str, Any]
    verdict: str | None = None
    verdict_ok: bool = True
    bar: Bar | None = None
    notes: tuple[str, ...] = field(default=())


_COLORS = {
    "weights": "blue",
    "main KV": "green",
    "indexer": "magenta",
    "draft": "cyan",
    "reserve": "yellow",
    "free": "white",
    "driver": "grey50",
    "driver+context": "grey50",
}


def emit(report: Report, fmt: OutputFormat, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    if fmt is OutputFormat.json:
        payload = {"schema_version": SCHEMA_VERSION, "command": report.command, **report.data}
        stream.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    elif fmt is OutputFormat.markdown:
        stream.write(_markdown(report))
    else:
        _rich(report, stream)


def _markdown(r: Report) -> str:
    lines = [f"## {r.title}", ""]
    if r.verdict:
        lines += [f"**{r.verdict}**", ""]
    for s in r.sections:
        lines += [f"### {s.title}", ""]
        headers = s.headers or ("", "")
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "---|" * len(headers))
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in s.rows]
        if s.note:
            lines += ["", s.note]
        lines.append("")
    if r.bar:
        total = sum(b for _, b in r.bar.parts)
        lines += [f"### {r.bar.title}", ""]
        lines.append(" \\| ".join(f"{k} {gib(v)} ({pct(v, total)})" for k, v in r.bar.parts if v))
        lines.append("")
    lines += [f"> {n}" for n in r.notes]
    return "\n".join(lines).rstrip() + "\n"


def _rich(r: Report, stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=stream, highlight=False, soft_wrap=False)
    console.print(Text(r.title, style="bold"))
    if r.verdict:
        console.print(Text(r.verdict, style="bold green" if r.verdict_ok else "bold red"))
    for s in r.sections:
        table = Table(title=s.title, title_justify="left", show_header=bool(s.headers), box=None, pad_edge=False)
        for i, h in enumerate(s.headers or ("", "")):
            table.add_column(h, justify="left" if i == 0 else "right" if not s.headers else "left")
        for row in s.rows:
            table.add_row(*row)
        console.print()
        console.print(table)
        if s.note:
            console.print(Text(s.note, style="dim"))
    if r.bar:
        console.print()
        console.print(Text(r.bar.title, style="italic"))
        total = sum(b for _, b in r.bar.parts) or 1
        width = 64
        line = Text()
        legend = Text()
        for label, b in r.bar.parts:
            if b <= 0:
                continue
            cells = max(1, round(width * b / total))
            color = _COLORS.get(label, "white")
            line.append("█" * cells, style=color)
            legend.append("■ ", style=color)
            legend.append(f"{label} {gib(b)}  ")
        console.print(line)
        console.print(legend)
    for note in r.notes:
        console.print(Text(f"note: {note}", style="yellow"))

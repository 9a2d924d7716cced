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


def error_document(message: str, code: int) -> str:
    """What --format json prints on stdout for an error, so that a script parses stdout either way."""
    return json.dumps({"error": message, "exit_code": code, "schema_version": SCHEMA_VERSION}, sort_keys=True) + "\n"


def emit(report: Report, fmt: OutputFormat, out: TextIO | None = None) -> None:
    """Print a report. A reader that went away (``| head -1``) is not an error: the command's verdict still
    decides the exit code, so a closed pipe is swallowed here, where the output is written."""
    stream = out or sys.stdout
    try:
        if fmt is OutputFormat.json:
            payload = {"schema_version": SCHEMA_VERSION, "command": report.command, **report.data}
            stream.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        elif fmt is OutputFormat.markdown:
            stream.write(_encodable(_markdown(report), stream))
        else:
            _rich(report, stream)
        stream.flush()
    except BrokenPipeError:
        if stream is sys.stdout:
            from kvplan.cli import quiet_closed_stdout

            quiet_closed_stdout()


_ASCII = {
    "×": "x",
    "−": "-",
    "–": "-",
    "—": "-",
    "■": "#",
    "█": "#",
    "→": "->",
    "←": "<-",
    "…": "...",
    "≈": "~",
    "≤": "<=",
    "≥": ">=",
    "Σ": "sum ",
    "·": ".",
    "±": "+/-",
    "µ": "u",
    "²": "^2",
    "✓": "ok",
    "✗": "x",
    "§": "S",
}


def _stream_encoding(stream: TextIO) -> str:
    return getattr(stream, "encoding", None) or "utf-8"


def _encodable(text: str, stream: TextIO) -> str:
    """text if the stream can encode it, else with ASCII stand-ins (× -> x, → -> ->, … -> ...)."""
    encoding = _stream_encoding(stream)
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        pass
    for k, v in _ASCII.items():
        text = text.replace(k, v)
    try:
        return text.encode(encoding, errors="replace").decode(encoding)
    except LookupError:
        return text.encode("ascii", errors="replace").decode("ascii")


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


MIN_WIDTH = 40
"""Narrowest layout kvplan draws; COLUMNS=0 or a 10-column pane still gets every figure, just wrapped."""


def console_width(stream: TextIO) -> int:
    """The width rich would use for stream (COLUMNS, the terminal, else 80), never under MIN_WIDTH."""
    from rich.console import Console

    try:
        width = Console(file=stream).width
    except (ValueError, OSError):
        width = 80
    return max(width, MIN_WIDTH)


def _rich(r: Report, stream: TextIO) -> None:
    """Draw the report with rich into a buffer at the stream's width, then write it in the stream's encoding."""
    import io

    from rich.console import Console

    tty = bool(getattr(stream, "isatty", lambda: False)())
    buffer = io.StringIO()
    console = Console(file=buffer, width=console_width(stream), force_terminal=tty, highlight=False, soft_wrap=False)
    _draw(r, console)
    stream.write(_encodable(buffer.getvalue(), stream))


def _draw(r: Report, console: Any) -> None:
    from rich.table import Table
    from rich.text import Text

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

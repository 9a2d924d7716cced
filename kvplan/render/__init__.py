"""The one place that formats output: sizes, percentages, tables, JSON and Markdown.

Commands build a ``Report`` (sections of rows, plus a JSON payload of raw integers); ``emit`` prints it
as a rich table, Markdown or JSON. Floats exist only here.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import field
from enum import Enum
from typing import Any, TextIO

from kvplan import record
from kvplan.fsio import quiet_closed_stdout, stdout_failed
from kvplan.render import ansi
from kvplan.render.lines import NotLaidOut, Segment, cell_lines, wrap_runs, wrap_styled
from kvplan.units import GB, MB, GiB, MiB
from kvplan.units import gib as gib  # the report style, kept importable here

SCHEMA_VERSION = 1
"""In every --format json document. Bumped on a breaking change to any command's output (a field removed,
renamed or retyped), with the ``schema_version`` const of every file in kvplan/schemas; an added field is not
breaking (it is added to the command's schema). tests/cli/test_json_schemas.py validates every command's output."""


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


def size(n: int) -> str:
    """Both unit systems: '52.68 GiB (56.56 GB)', '64.00 MiB (67.11 MB)'; exact bytes under 1 MiB.

    From 1,000 MiB up the figure rolls up to GiB ('0.98 GiB (1.05 GB)', never '1,006.50 MiB')."""
    if abs(n) < MiB:
        return nbytes(n)
    if abs(n) < 1000 * MiB:
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


@record
class Section:
    title: str
    rows: tuple[tuple[str, ...], ...]
    headers: tuple[str, ...] = ()
    note: str = ""


@record
class Bar:
    """A one-line memory map: (label, bytes) parts of a whole."""

    title: str
    parts: tuple[tuple[str, int], ...]


@record
class Report:
    command: str
    title: str
    sections: tuple[Section, ...]
    data: dict[str, Any]
    verdict: str | None = None
    verdict_ok: bool = True
    bar: Bar | None = None
    notes: tuple[str, ...] = field(default=())
    startup_error: str | None = None
    """Set when the engine would refuse to start the deployment the report is about (PoolPlan.startup_error):
    every format then says so first, in one shared line (:func:`startup_line`)."""


def startup_line(reason: str) -> str:
    """The one line every report prints for a deployment the engine would not start."""
    return f"ENGINE WOULD NOT START: {reason.rstrip('. ')}. The pool figures are what it would have tried to build."


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

    def draw() -> None:
        if fmt is OutputFormat.json:
            payload = {"schema_version": SCHEMA_VERSION, "command": report.command, **report.data}
            if report.startup_error is not None:
                payload["startup_error"] = report.startup_error
            stream.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        elif fmt is OutputFormat.markdown:
            stream.write(_encodable(_markdown(report), stream))
        else:
            _rich(report, stream)

    write_out(draw, stream)


def write_out(draw: Callable[[], None], stream: TextIO) -> None:
    """Run ``draw`` (it writes to ``stream``) and flush, with the output channels' policy: a closed pipe on stdout
    is swallowed, a stdout that cannot be written is one line and exit 2 (kvplan.fsio)."""
    try:
        draw()
        stream.flush()
    except BrokenPipeError:
        if stream is sys.stdout:
            quiet_closed_stdout()
    except OSError as e:  # > /dev/full: a write, said as one (it was "cannot read", or exit 4 under json)
        if stream is not sys.stdout:
            raise
        raise stdout_failed(e) from None


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


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown(r: Report) -> str:
    lines = [f"## {r.title}", ""]
    if r.startup_error:
        lines += [f"**{startup_line(r.startup_error)}**", ""]
    if r.verdict:
        lines += [f"**{r.verdict}**", ""]
    for s in r.sections:
        if s.title:
            lines += [f"### {s.title}", ""]
        headers = _headers(s)
        if headers:
            lines.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
        else:  # a Markdown table needs a header row: an empty one, which renders as nothing
            lines.append("|" + " |" * _width_of(s))
        lines.append("|" + "---|" * (len(headers) or _width_of(s)))
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in s.rows]
        if s.note:
            lines += ["", s.note]
        lines.append("")
    if r.bar:
        total = sum(b for _, b in r.bar.parts)
        lines += [f"### {r.bar.title}", ""]
        lines.append("; ".join(f"{k} {gib(v)} ({pct(v, total)})" for k, v in r.bar.parts if v))
        lines.append("")
    lines += [f"> {n}" for n in r.notes]
    return "\n".join(lines).rstrip() + "\n"


def _headers(s: Section) -> tuple[str, ...]:
    """The header row, or () when every header is blank (no blank header line)."""
    return s.headers if any(h.strip() for h in s.headers) else ()


def _width_of(s: Section) -> int:
    return max([len(s.headers), *(len(row) for row in s.rows)]) or 1


MIN_WIDTH = 40
"""Narrowest layout kvplan draws; COLUMNS=0 or a 10-column pane still gets every figure, just wrapped."""


def console_width(stream: TextIO) -> int:
    """The width rich would use for stream, never under MIN_WIDTH: rich's ``Console.size`` rule without
    importing rich.console: COLUMNS when it is all digits, else the terminal of stdin/stdout/stderr, else 80."""
    del stream  # rich measures the process's terminal, not the stream it writes to
    width: int | None = None
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return max(width or 80, MIN_WIDTH)


def _rich(r: Report, stream: TextIO) -> None:
    """Draw the report at the stream's width in the stream's encoding: plain text laid out exactly as rich lays it
    out (``plain_text``), and on a terminal painted exactly as rich paints it (kvplan.render.ansi), without
    importing rich's console; through rich itself on Windows (its console API) or for text kvplan does not lay out."""
    tty = bool(getattr(stream, "isatty", lambda: False)())
    width = console_width(stream)
    if not tty:
        stream.write(_encodable(plain_text(r, width), stream))
        return
    if sys.platform != "win32":
        try:
            stream.write(_encodable(terminal_text(r, width, os.environ), stream))
            return
        except NotLaidOut:
            pass
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=tty, highlight=False, soft_wrap=False)
    _draw(r, console)
    stream.write(_encodable(buffer.getvalue(), stream))


def terminal_text(r: Report, width: int, environ: Mapping[str, str]) -> str:
    """The report as rich's ``Console(force_terminal=True)`` writes it under ``environ`` (NotLaidOut where kvplan
    leaves it to rich): on a dumb terminal rich draws 80 columns whatever the width (``Console.size``)."""
    if ansi.color_system(environ) is None:
        width = ansi.DUMB_WIDTH
    return ansi.paint(styled_lines(r, width), environ)


_FIGURE = re.compile(r"^[-+−~≈<>≤≥]?\(?\d")
_SHORT = 12
"""Cells up to this many characters never wrap (ok, FAIL, n/a, yes)."""
_FIGURE_CHARS = 24
"""Longest cell that starts with a number and still counts as one figure ('1,048,576 of 1,048,576')."""
_GAP = 2
"""Spaces between two columns."""
_BAR_CHARS = {
    "weights": "W",
    "main KV": "K",
    "indexer": "I",
    "draft": "D",
    "reserve": "R",
    "free": ".",
    "driver": "d",
    "driver+context": "d",
}


def _is_figure(cell: str) -> bool:
    """A figure ('140.40 GiB (150.75 GB)', '2,048', '5.4%') or a short word ('ok'): never wrapped inside."""
    return not cell or len(cell) <= _SHORT or (bool(_FIGURE.match(cell)) and len(cell) <= _FIGURE_CHARS)


def _figure_parts(cell: str) -> list[str]:
    """Where a figure may break: '49.97 GiB (53.65 GB)' -> ['49.97 GiB', '(53.65 GB)']; nowhere else."""
    return cell.replace(" (", "\n(").split("\n")


def _fit_figure(cell: str, width: int) -> str:
    """The figure on one line if it fits, else one line per part (the unit stays with its number)."""
    from rich.cells import cell_len

    return cell if cell_len(cell) <= width else "\n".join(_figure_parts(cell))


def _column_plan(s: Section, width: int) -> list[int] | None:
    """Column widths that keep every figure whole and every word unbroken, or None if none fit in width.

    A column whose cells are all figures ('140.40 GiB (150.75 GB)', '2,048', 'ok') never wraps; a text
    column wraps between words, never inside one, so 'max_total_num_tokens=567,616' stays on one line.
    """
    from rich.cells import cell_len

    ncols = _width_of(s)
    rows = [tuple(row) + ("",) * (ncols - len(row)) for row in s.rows]
    headers = _headers(s)
    low: list[int] = []
    high: list[int] = []
    for j in range(ncols):
        cells = [row[j] for row in rows]
        head = headers[j] if j < len(headers) else ""
        longest = max([cell_len(c) for c in cells] + [cell_len(head), 1])
        if all(_is_figure(c) for c in cells):
            low.append(max([cell_len(part) for c in cells for part in _figure_parts(c)] + [cell_len(head), 1]))
        else:
            words = [cell_len(w) for c in [*cells, head] for w in c.split()]
            low.append(max([*words, min(longest, 16)]))
        high.append(longest)
    room = width - _GAP * (ncols - 1)
    if sum(low) > room:
        return None
    widths = list(low)
    spare = room - sum(widths)
    # fair shares, the cheapest wish first: short labels get their whole width, long prose shares the rest
    figure = [all(_is_figure(row[j]) for row in rows) for j in range(ncols)]
    order = sorted(range(ncols), key=lambda j: (not figure[j], high[j] - low[j]))  # figures on one line first
    for n, j in enumerate(order):
        give = min(high[j] - low[j], spare if figure[j] else spare // (ncols - n))
        widths[j] += give
        spare -= give
    return widths


def _draw(r: Report, console: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    console.print(Text(r.title, style="bold"))
    if r.startup_error:
        console.print(Text(startup_line(r.startup_error), style="bold red"))
    if r.verdict:
        console.print(Text(r.verdict, style="bold green" if r.verdict_ok else "bold red"))
    for s in r.sections:
        console.print()
        if s.title:
            console.print(Text(s.title, style="bold"))
        widths = _column_plan(s, console.width)
        headers = _headers(s)
        if widths is None:
            _draw_records(s, console)
        else:
            table = Table(show_header=bool(headers), box=None, pad_edge=False, padding=(0, _GAP // 2), expand=False)
            numeric = [all(_is_figure(row[j]) for row in s.rows if j < len(row)) for j in range(len(widths))]
            for j, w in enumerate(widths):
                head = headers[j] if j < len(headers) else ""
                right = bool(numeric[j] and j)
                table.add_column(
                    Text(head), width=w, no_wrap=numeric[j], overflow="fold", justify="right" if right else "left"
                )
            for row in s.rows:
                table.add_row(*(Text(_fit_figure(c, widths[j]) if numeric[j] else c) for j, c in enumerate(row)))
                # every cell is a Text: no rich markup or :emoji: codes read from a cell (log text is untrusted)
            console.print(table)
        if s.note:
            console.print(Text(s.note, style="dim"))
    if r.bar:
        _draw_bar(r.bar, console)
    for note in r.notes:
        console.print(Text(f"note: {note}", style="yellow"))


def _draw_records(s: Section, console: Any) -> None:
    """Too narrow for the table: one block per row, 'header: value' lines, every figure whole."""
    from rich.text import Text

    headers = _headers(s)
    for row in s.rows:
        if not row:
            continue
        console.print(Text(row[0], style="bold"))
        for j, cell in enumerate(row[1:], start=1):
            if not cell:
                continue
            head = headers[j] if j < len(headers) else ""
            console.print(Text(f"  {head}: {cell}" if head else f"  {cell}"))


def _draw_bar(bar: Bar, console: Any) -> None:
    """The memory map: one character per segment (W weights, K main KV, ...) so it reads without colour."""
    from rich.text import Text

    console.print()
    console.print(Text(bar.title, style="bold"))
    parts = [(label, b) for label, b in bar.parts if b > 0]
    total = sum(b for _, b in parts) or 1
    width = min(64, console.width)
    line = Text()
    legend = Text()
    for label, b in parts:
        cells = max(1, round(width * b / total))
        glyph = _BAR_CHARS.get(label, label[:1] or "?")
        color = _COLORS.get(label, "white")
        line.append(glyph * cells, style=color)
        if legend:
            legend.append("  ")
        legend.append(glyph, style=f"bold {color}")
        legend.append(f" {label} {gib(b)} ({pct(b, total)})")
    console.print(line, overflow="fold")
    console.print(legend)


# --------------------------------------------------------------------------- plain text (not a terminal)


def plain_text(r: Report, width: int) -> str:
    """The report as ``_draw`` prints it through rich on a non-terminal, character for character (the layout
    rules of rich's Table with box=None, pad_edge=False, padding (0, 1), and of ``Console.print(Text)``: word
    wrap with rich's own ``divide_line``, folded long words, cell lines padded to the column width).
    tests/render/test_render_plain.py checks the equality against rich on every command's reports."""
    return "".join("".join(text for text, _ in line) + "\n" for line in styled_lines(r, width, styled=False))


def styled_lines(r: Report, width: int, *, styled: bool = True) -> list[list[Segment]]:
    """The report's lines as ``_draw`` prints them through rich, each cut into rich's segments with their styles
    (kvplan.render.lines): joined, the plain text (``styled`` False: no style, never NotLaidOut); painted
    (kvplan.render.ansi), a terminal's bytes."""
    out: list[list[Segment]] = []

    def text(line: str, style: str = "") -> None:
        out.extend(wrap_styled(line, style if styled else "", width))

    text(r.title, "bold")
    if r.startup_error:
        text(startup_line(r.startup_error), "bold red")
    if r.verdict:
        text(r.verdict, "bold green" if r.verdict_ok else "bold red")
    for s in r.sections:
        out.append([])
        if s.title:
            text(s.title, "bold")
        widths = _column_plan(s, width)
        if widths is None:
            headers = _headers(s)
            for row in s.rows:
                if not row:
                    continue
                text(row[0], "bold")
                for j, cell in enumerate(row[1:], start=1):
                    if cell:
                        head = headers[j] if j < len(headers) else ""
                        text(f"  {head}: {cell}" if head else f"  {cell}")
        else:
            out.extend(_table_segments(s, widths))
        if s.note:
            text(s.note, "dim")
    if r.bar:
        out.append([])
        text(r.bar.title, "bold")
        out.extend(_bar_segments(r.bar, width, styled))
    for note in r.notes:
        text(f"note: {note}", "yellow")
    return out


def _bar_segments(bar: Bar, width: int, styled: bool) -> list[list[Segment]]:
    """The memory map's two lines as ``_draw_bar`` appends them: coloured glyph runs, then the legend."""
    parts = [(label, b) for label, b in bar.parts if b > 0]
    total = sum(b for _, b in parts) or 1
    bar_width = min(64, width)
    line: list[Segment] = []
    legend: list[Segment] = []
    for label, b in parts:
        glyph = _BAR_CHARS.get(label, label[:1] or "?")
        color = _COLORS.get(label, "white")
        line.append((glyph * max(1, round(bar_width * b / total)), color))
        legend += [("  ", "")] if legend else []
        legend += [(glyph, f"bold {color}"), (f" {label} {gib(b)} ({pct(b, total)})", "")]
    if not styled:
        return [out for runs in (line, legend) for out in wrap_styled("".join(t for t, _ in runs), "", width)]
    return wrap_runs(line, width) + wrap_runs(legend, width)


def _table_segments(s: Section, widths: list[int]) -> list[list[Segment]]:
    """A table's lines: a header line is each cell in the header's bold (rich's 'table.header'), as rich's Table
    writes it: the left padding, the text and the right padding, three segments, or one where the cell is blank
    above a shorter header (its vertical-alignment filler); a body line is unstyled."""
    header_lines, fills, rows = _table_rows(s, widths)
    last = len(widths) - 1
    out: list[list[Segment]] = []
    for n, cells in enumerate(rows):
        if n >= header_lines:
            out.append([("  ".join(cells), "")])
            continue
        line: list[Segment] = []
        for j, cell in enumerate(cells):
            left, right = (" " if j else ""), (" " if j < last else "")
            if n < fills[j]:
                line.append((left + cell + right, "bold"))
                continue
            line += [(left, "bold")] if left else []
            line.append((cell, "bold"))
            line += [(right, "bold")] if right else []
        out.append(line)
    return out


def _table_rows(s: Section, widths: list[int]) -> tuple[int, list[int], list[list[str]]]:
    """A section as rich's Table draws it with kvplan's column plan (box None, two spaces between columns): the
    header's lines (0 without one) and the blank lines above each header cell, then each line's cells, each its
    column's width."""
    headers = _headers(s)
    numeric = [all(_is_figure(row[j]) for row in s.rows if j < len(row)) for j in range(len(widths))]
    right = [bool(numeric[j] and j) for j in range(len(widths))]
    rows: list[list[str]] = []
    if headers:
        rows.append([headers[j] if j < len(headers) else "" for j in range(len(widths))])
    body = [[_fit_figure(c, widths[j]) if numeric[j] else c for j, c in enumerate(row)] for row in s.rows]
    out: list[list[str]] = []
    fills: list[int] = []
    header_lines = 0
    for n, row in enumerate([*rows, *body]):
        cells = [row[j] if j < len(row) else "" for j in range(len(widths))]
        is_header = n < len(rows)
        rendered = [
            cell_lines(c, w, right=right[j], no_wrap=numeric[j]) for j, (c, w) in enumerate(
                zip(cells, widths, strict=True))
        ]  # fmt: skip
        height = max(len(lines) for lines in rendered)
        if is_header:  # rich aligns header cells to the bottom of the header row
            header_lines, fills = height, [height - len(lines) for lines in rendered]
            rendered = [[" " * w] * (height - len(lines)) + lines for lines, w in zip(rendered, widths, strict=True)]
        for i in range(height):
            out.append([lines[i] if i < len(lines) else " " * w for lines, w in zip(rendered, widths, strict=True)])
    return header_lines, fills, out

"""Text laid out line by line as rich lays it out (wrapping, folding, table cells), without rich's console.

A line is a list of segments, (text, style) pairs, cut where rich cuts its own segments, so that kvplan.render.ansi
paints a terminal's bytes as rich paints them; the style "" is none. rich.cells and rich._wrap (its cell widths
and word wrap) load on the first call."""

from __future__ import annotations

Segment = tuple[str, str]
"""A run of text and its style ('bold', 'bold red', 'dim', ...; '' for none)."""

_CONTROL = {ord(c): None for c in "\x07\x08\x0b\x0c\x0d"}
"""What rich's Text drops from its input (rich.control.strip_control_codes)."""


class NotLaidOut(ValueError):
    """Styled runs whose text rich would rewrite before wrapping (newlines, tabs, control codes): drawn by rich."""


def lines_of(text: str) -> list[str]:
    """rich's ``Text.split('\\n', allow_blank=True)`` after its control-code strip, tabs expanded to 8."""
    parts = text.translate(_CONTROL).split("\n")  # a trailing newline opens a blank line, as in rich
    return [_expand_tabs(p) if "\t" in p else p for p in parts]


def _expand_tabs(line: str) -> str:
    """Tabs to the next multiple of 8 cells, counting wide characters as two (rich's ``Text.expand_tabs``)."""
    from rich.cells import cell_len

    out: list[str] = []
    position = 0
    *heads, last = line.split("\t")
    for part in heads:
        position += cell_len(part)
        spaces = 8 - position % 8
        out.append(part + " " * spaces)
        position += spaces
    return "".join(out) + last


def _pieces(line: str, width: int) -> list[tuple[int, str]]:
    """One line word-wrapped as rich's ``Text.wrap`` does (``divide_line`` then ``rstrip_end``): each piece with
    the offset it starts at."""
    from rich.cells import cell_len

    if cell_len(line) <= width:  # divide_line breaks nothing in a line that fits (every word fits what is left)
        return [(0, line)]
    from rich._wrap import divide_line

    offsets = divide_line(line, width, fold=True)
    out = []
    for a, b in zip([0, *offsets], [*offsets, len(line)], strict=True):
        piece = line[a:b]
        excess = cell_len(piece) - width
        if excess > 0:  # rstrip_end: drop trailing whitespace past the width, no more
            stripped = piece.rstrip()
            piece = piece[: max(len(stripped), len(piece) - excess)]
        out.append((a, piece))
    return out


def divide(line: str, width: int) -> list[str]:
    return [piece for _, piece in _pieces(line, width)]


def crop(line: str, width: int) -> str:
    from rich.cells import cell_len, set_cell_size

    return set_cell_size(line, width) if cell_len(line) > width else line


def wrap_text(text: str, width: int) -> list[str]:
    """``Console.print(Text(text))`` on a non-terminal: wrapped, cropped to the width, not padded."""
    return [crop(piece, width) for line in lines_of(text) for piece in divide(line, width)]


def wrap_styled(text: str, style: str, width: int) -> list[list[Segment]]:
    """``Console.print(Text(text, style=style))``: each line one segment of the style (blank lines none). A styled
    tab is NotLaidOut: rich's ``Text.expand_tabs`` cuts its segments there."""
    if style and "\t" in text:
        raise NotLaidOut(text[:40])
    return [[(line, style)] if line else [] for line in wrap_text(text, width)]


def wrap_runs(runs: list[Segment], width: int) -> list[list[Segment]]:
    """``Console.print(Text)`` of a Text appended run by run (``Text.append(text, style)``): wrapped as one line,
    each line cut into segments where a run starts or ends, as rich's ``Text.render`` cuts at its spans."""
    line = "".join(text for text, _ in runs)
    if lines_of(line) != [line]:
        raise NotLaidOut(line[:40])
    out: list[list[Segment]] = []
    for start, piece in _pieces(line, width):
        shown = crop(piece, width)
        if not line.startswith(shown, start):  # a wide character cut in two at the edge: rich pads it
            raise NotLaidOut(line[:40])
        end = start + len(shown)
        segments: list[Segment] = []
        at = 0
        for text, style in runs:
            a, b = max(at, start), min(at + len(text), end)
            if a < b:
                segments.append((line[a:b], style))
            at += len(text)
        out.append(segments)
    return out


def cell_lines(text: str, width: int, *, right: bool, no_wrap: bool) -> list[str]:
    """One table cell as rich renders it in a column of ``width``: each line exactly ``width`` cells."""
    from rich.cells import cell_len, set_cell_size

    out = []
    for line in lines_of(text):
        for piece in [line] if no_wrap else divide(line, width):
            if right:
                piece = crop(piece.rstrip(), width)
                out.append(" " * (width - cell_len(piece)) + piece)
            else:
                out.append(set_cell_size(piece, width))
    return out or [" " * width]

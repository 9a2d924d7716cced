"""A report's styled lines painted for a terminal in the bytes rich writes, without importing rich's console.

rich's ``Console(force_terminal=True)`` picks its colour system from the environment (``Console._detect_color_system``:
TERM dumb or unknown none, COLORTERM truecolor or 24bit, TERM's last word 256color or kitty 8-bit, else the 16
standard colours), drops colours but not bold or dim under a non-empty NO_COLOR (``Segment.remove_color``), and
writes each styled segment as ``ESC [ codes m text ESC [ 0 m`` (``Style.render``), the codes being the attributes
then the colour (``Style._make_ansi_codes``). Importing rich.console and rich.table and drawing through them cost
about 30 ms of `kvplan admit --ctx 1M` on a terminal; tests/render/test_render_ansi.py checks every report against
rich itself under each colour system."""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.render.lines import NotLaidOut, Segment

_ATTRIBUTES = {"bold": "1", "dim": "2"}
"""rich.style.Style's attribute bits, in rich's order (bold, dim, italic, ...): the two kvplan draws."""
_STANDARD = {"black": 0, "red": 1, "green": 2, "yellow": 3, "blue": 4, "magenta": 5, "cyan": 6, "white": 7}
"""rich.color.ANSI_COLOR_NAMES of the 8 standard colours: foreground 30 + n in every colour system."""
_EIGHT_BIT = {"grey50": (244, 7)}
"""Colours of the 256-colour palette kvplan draws: the number (38;5;n), and the standard colour rich's
``Color.downgrade`` takes for it on a 16-colour terminal (grey50, #808080, is white, 37)."""
DUMB_WIDTH = 80
"""rich's width on a dumb terminal (TERM dumb or unknown), whatever it is given (``Console.size``)."""
_TERM_COLORS = {"kitty": "256", "256color": "256", "16color": "standard"}
"""rich.console._TERM_COLORS: TERM's last word -> colour system."""


def color_system(environ: Mapping[str, str]) -> str | None:
    """rich's colour system for a forced terminal on Linux or macOS: None, 'standard', '256' or 'truecolor'."""
    term = environ.get("TERM", "")
    if term.lower() in ("dumb", "unknown"):
        return None
    if environ.get("COLORTERM", "").strip().lower() in ("truecolor", "24bit"):
        return "truecolor"
    return _TERM_COLORS.get(term.strip().lower().rpartition("-")[2], "standard")


def codes(style: str, system: str, *, no_color: bool = False) -> str:
    """The SGR parameters rich writes for ``style`` ('bold red' -> '1;31'); '' writes the text bare. A style kvplan
    does not draw is NotLaidOut (the caller draws through rich instead)."""
    words = style.split()
    attributes = [_ATTRIBUTES[w] for w in ("bold", "dim") if w in words]
    colors = [w for w in words if w not in _ATTRIBUTES]
    if len(colors) > 1 or not set(colors) <= {*_STANDARD, *_EIGHT_BIT}:
        raise NotLaidOut(style)
    color = ""
    for word in colors:
        if word in _STANDARD:
            color = str(30 + _STANDARD[word])
        else:
            number, standard = _EIGHT_BIT[word]
            color = f"38;5;{number}" if system != "standard" else str(30 + standard)
    return ";".join([*attributes, *([color] if color and not no_color else [])])


def paint(lines: list[list[Segment]], environ: Mapping[str, str]) -> str:
    """The lines as rich writes them to a forced terminal under ``environ``, each ended by a newline."""
    system = color_system(environ)
    no_color = environ.get("NO_COLOR", "") != ""
    out: list[str] = []
    for line in lines:
        for text, style in line:
            sgr = codes(style, system, no_color=no_color) if style and system and text else ""
            out.append(f"\x1b[{sgr}m{text}\x1b[0m" if sgr else text)
        out.append("\n")
    return "".join(out)

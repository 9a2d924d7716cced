"""On a terminal kvplan paints its reports itself (kvplan.render.ansi over kvplan.render.styled_lines), byte for
byte as rich's Console(force_terminal=True) draws them (kvplan.render._draw), under each colour system rich picks
from the environment; every command's report and random reports are drawn both ways."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan.render as render
from kvplan.render import Bar, Report, Section, ansi, styled_lines
from kvplan.render.lines import NotLaidOut
from tests.render.test_render_plain import _reports, reports  # noqa: F401 (the fixture)

ENVIRONS = [
    {"TERM": "xterm"},  # rich: 16 standard colours
    {"TERM": "xterm-256color"},  # 8-bit: grey50 is 38;5;244
    {"TERM": "xterm-kitty"},
    {"TERM": "screen-16color"},
    {"TERM": "xterm", "COLORTERM": "truecolor"},
    {"TERM": "xterm", "COLORTERM": " 24BIT "},
    {"TERM": "dumb"},  # no codes at all
    {"TERM": "Unknown"},
    {},  # no TERM: standard
    {"TERM": "xterm-256color", "NO_COLOR": "1"},  # bold and dim kept, colours dropped
    {"TERM": "xterm", "NO_COLOR": ""},  # empty: colours kept
]


def _via_rich(r: Report, width: int, environ: dict[str, str]) -> str:
    from rich.console import Console
    from rich.style import Style

    # a rich Style keeps the codes of the first colour system it was drawn in (Style._ansi); one process draws in
    # one system, so each draw here starts from fresh styles
    Style.parse.cache_clear()
    Style._add.cache_clear()

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=True, highlight=False, soft_wrap=False, _environ=environ)
    render._draw(r, console)
    return buffer.getvalue()


@pytest.mark.parametrize("environ", ENVIRONS, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()) or "none")
@pytest.mark.parametrize("width", [40, 80, 160])
def test_every_command_report_paints_as_rich_paints_it(
    reports: list[Report],  # noqa: F811 (the fixture)
    width: int,
    environ: dict[str, str],
) -> None:
    for r in reports:
        assert render.terminal_text(r, width, environ) == _via_rich(r, width, environ), (r.command, width)


@settings(max_examples=300, deadline=None)
@given(r=_reports(), width=st.integers(40, 140), environ=st.sampled_from(ENVIRONS))
def test_random_reports_paint_as_rich_paints_them(r: Report, width: int, environ: dict[str, str]) -> None:
    try:
        painted = render.terminal_text(r, width, environ)
    except NotLaidOut:  # drawn by rich itself
        return
    assert painted == _via_rich(r, width, environ)


def test_every_colour_kvplan_draws_has_rich_codes() -> None:
    # rich.style.Style._make_ansi_codes per colour system, each in a fresh interpreter (rich caches the codes of a
    # style across systems): 'bold red' is 1;31 everywhere, grey50 38;5;244 (8-bit, truecolor) or 37 (standard)
    styles = ["bold", "dim", "yellow", "bold red", "bold green"]
    styles += [c for c in render._COLORS.values()] + [f"bold {c}" for c in render._COLORS.values()] + ["white"]
    for system, name in (("standard", "STANDARD"), ("256", "EIGHT_BIT"), ("truecolor", "TRUECOLOR")):
        code = (
            "import sys; from rich.style import Style; from rich.color import ColorSystem\n"
            f"print('|'.join(Style.parse(s)._make_ansi_codes(ColorSystem.{name}) for s in sys.argv[1:]))"
        )
        proc = subprocess.run([sys.executable, "-c", code, *styles], capture_output=True, text=True, check=True)
        assert [ansi.codes(s, system) for s in styles] == proc.stdout.strip().split("|"), system


def test_a_style_kvplan_does_not_draw_goes_to_rich() -> None:
    with pytest.raises(NotLaidOut):
        ansi.codes("bold orange3", "standard")
    r = Report(command="x", title="t", sections=(Section(title="s", rows=(("a", "1"),)),), data={})
    bar = Bar(title="b", parts=(("weights\tx", 1),))  # a tab: rich expands it before wrapping
    with pytest.raises(NotLaidOut):
        styled_lines(Report(command="x", title="t", sections=(), data={}, bar=bar), 80)
    assert styled_lines(r, 80)[0] == [("t", "bold")]


def test_a_terminal_gets_the_painted_path_without_rich_console() -> None:
    # a pty, as a user runs it: the report is painted, rich.console (and rich.table) never imported
    import os
    import pty

    code = (
        "import sys; from kvplan.cli import main; sys.argv = ['kvplan', 'admit', '--ctx', '1M']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(str(sorted(m for m in sys.modules if m.startswith('rich.'))))"
    )
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "80"}
    env.pop("NO_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-c", code], stdout=follower, stderr=subprocess.PIPE, text=True, env=env, check=False
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert shown.startswith(b"\x1b[1mkvplan admit: glm-5.3"), shown[:80]
    loaded = proc.stderr.strip().splitlines()[-1]
    assert "rich.console" not in loaded and "rich.table" not in loaded, loaded

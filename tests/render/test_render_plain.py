"""The plain-text renderer (kvplan.render.plain_text) draws exactly what rich draws on a non-terminal.

kvplan prints through rich only on a terminal (colour); for pipes, files and CI it lays the report out itself,
which skips importing rich's console and table (issue 15 item 5). The look must not change: every report the
commands produce, and random reports, are drawn both ways and compared character for character.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import kvplan.render as render
from kvplan.cli import app
from kvplan.render import Bar, Report, Section, plain_text

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "80"})
FIELD = Path(__file__).parents[1] / "data" / "logs" / "field"

COMMANDS = [
    ["admit", "--ctx", "1M"],
    ["admit", "--ctx", "1M", "--set", "dcp=8"],
    ["admit", "--ctx", "1M", "-d", "glm-5.3-8xh200-vllm", "--set", "context_length=1M"],
    ["admit", "--ctx", "128K", "--model", "llama-3.1-70b", "--set", "kv_cache_dtype=auto", "--set", "page_size=1"],
    ["budget"],
    ["workspace"],
    ["workspace", "--batch", "4", "--ctx", "128K"],
    ["prefix", "--ctx", "1M", "--hit", "100000"],
    ["transfer", "--ctx", "138615", "--unit", "chunk:256", "-d", "glm-5.3-8xh200-vllm"],
    ["deployments", "show", "glm-5.3-8xh200-sglang"],
    ["deployments", "list"],
    ["models", "show", "qwen3-235b-a22b"],
    ["models", "list"],
    ["gpus"],
    ["knobs"],
    ["doctor", "--log", str(FIELD / "vllm-llama-3.1-8b-h100-llmd-planner-tp1.log")],
]


def _via_rich(r: Report, width: int) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, highlight=False, soft_wrap=False)
    render._draw(r, console)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def reports() -> list[Report]:
    seen: list[Report] = []
    real = render._rich

    def capture(r: Report, stream: object) -> None:
        seen.append(r)

    render._rich = capture  # type: ignore[assignment]
    try:
        for argv in COMMANDS:
            result = runner.invoke(app, argv)
            assert result.exit_code in (0, 1), (argv, result.output)
    finally:
        render._rich = real  # type: ignore[assignment]
    assert len(seen) == len(COMMANDS)
    return seen


@pytest.mark.parametrize("width", [40, 57, 80, 100, 160])
def test_every_command_report_draws_as_rich_draws_it(reports: list[Report], width: int) -> None:
    for r in reports:
        assert plain_text(r, width) == _via_rich(r, width), (r.command, width)


_WORD = st.text(alphabet="abcxyz019,.:()[]×−→漢", min_size=1, max_size=30)
_CELL = st.one_of(
    st.just(""),
    st.lists(_WORD, min_size=1, max_size=8).map(" ".join),
    st.builds(lambda a, b: f"{a:,.2f} GiB ({b:,.2f} GB)", st.floats(0, 1e6), st.floats(0, 1e6)),
    st.text(alphabet="ab \t\n\r\x07漢", max_size=40),
)


@st.composite
def _reports(draw: st.DrawFn) -> Report:
    ncols = draw(st.integers(1, 5))
    sections = tuple(
        Section(
            title=draw(_CELL),
            rows=tuple(
                tuple(draw(st.lists(_CELL, min_size=0, max_size=ncols))) for _ in range(draw(st.integers(0, 4)))
            ),
            headers=tuple(draw(st.lists(_CELL, min_size=0, max_size=ncols))),
            note=draw(_CELL),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    bar = None
    if draw(st.booleans()):
        parts = tuple((label, draw(st.integers(0, 10**12))) for label in ("weights", "main KV", "free", "zzz"))
        bar = Bar(title=draw(_CELL), parts=parts)
    return Report(
        command="x",
        title=draw(_CELL),
        sections=sections,
        data={},
        verdict=draw(st.one_of(st.none(), _CELL)),
        bar=bar,
        notes=tuple(draw(st.lists(_CELL, max_size=3))),
        startup_error=draw(st.one_of(st.none(), _CELL)),
    )


@settings(max_examples=300, deadline=None)
@given(r=_reports(), width=st.integers(40, 140))
def test_random_reports_draw_as_rich_draws_them(r: Report, width: int) -> None:
    assert plain_text(r, width) == _via_rich(r, width)


def test_a_pipe_gets_the_plain_path_without_rich_console() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from kvplan.cli import main; sys.argv = ['kvplan', 'admit', '--ctx', '1M']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(str('rich.console' in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.stdout.startswith("kvplan admit:")
    assert proc.stderr.strip().endswith("False")

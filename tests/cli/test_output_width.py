"""At 80 and 60 columns (any pipe, any CI log) no figure is cut (issue 9, item 16).

The check: every number in a command's Markdown output (never wrapped) appears whole in its table output at
that width, no line is wider than the terminal, and nothing is elided with '…'. Both formats come from the
same Report, so the numbers must be the same set.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _trace(tmp_path: Path) -> Path:
    p = tmp_path / "t.jsonl"
    rows = [{"timestamp": i, "input_length": 2048, "output_length": 1, "hash_ids": [0, 1, 2, 3 + i]} for i in range(4)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


COMMANDS: dict[str, list[str]] = {
    "admit 1M": ["admit", "--ctx", "1M"],
    "admit vllm": ["admit", "--ctx", "128K", "-d", "glm-5.3-8xh200-vllm"],
    "admit dcp": ["admit", "--ctx", "1M", "--set", "dcp=8"],
    "budget": ["budget"],
    "workspace": ["workspace"],
    "prefix": ["prefix", "--ctx", "1M", "--hit", "100000", "--sweep", "4"],
    "transfer": ["transfer", "--ctx", "1M", "--set", "dcp=8"],
    "deployments show sglang": ["deployments", "show", "glm-5.3-8xh200-sglang"],
    "deployments show vllm": ["deployments", "show", "glm-5.3-8xh200-vllm"],
    "deployments list": ["deployments", "list"],
    "models list": ["models", "list"],
    "models show": ["models", "show", "glm-5.3"],
    "knobs": ["knobs"],
    "diff": ["diff", "glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"],
    "doctor": ["doctor", "--log", str(DATA / "logs" / "sglang-0.5.23-glm53-dcp8.log")],
}


def _numbers(text: str) -> set[str]:
    return set(NUMBER.findall(text))


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize("name", [*COMMANDS, "simulate"])
def test_no_figure_is_cut(tmp_path: Path, name: str, width: int) -> None:
    args = COMMANDS.get(name) or ["simulate", str(_trace(tmp_path)), "--deploy", "glm-5.3-8xh200-sglang"]
    if name == "doctor" and not Path(args[-1]).is_file():
        pytest.skip("doctor fixture log missing")
    runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": str(width)})
    table = runner.invoke(app, args)
    md = runner.invoke(app, [*args, "--format", "markdown"])
    assert table.exit_code in (0, 1), table.output
    assert md.exit_code == table.exit_code
    lines = table.stdout.splitlines()
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, too_wide
    assert "…" not in table.stdout
    missing = _numbers(md.stdout.replace("\\|", "|")) - _numbers(table.stdout)
    assert not missing, f"figures cut or lost at {width} columns: {sorted(missing)}\n{table.stdout}"


def test_the_issues_cut_figures_are_whole_at_80_columns() -> None:
    # Regression: "max_total_num_tokens=567,…" and "2,04…" at 80 columns. 567,616 tokens: 8,869 pages × 64;
    # 2,048: the default max_running_requests (a 1M request is 16,384 pages of 64 tokens).
    out = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "80"}).invoke(app, ["admit", "--ctx", "1M"]).stdout
    assert "567,616" in out and "2,048" in out and "16,384" in out


def test_memory_map_reads_without_colour() -> None:
    # Regression: one glyph in one colour without a TTY. Each segment has its own character and a legend entry.
    out = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "80"}).invoke(app, ["admit", "--ctx", "1M"]).stdout
    lines = out.splitlines()
    bar = lines[lines.index(next(line for line in lines if line.startswith("Memory map"))) + 1]
    assert set(bar) >= {"W", "K", "R"}  # weights, main KV, reserve at least
    legend = " ".join(lines[lines.index(bar) + 1 :])
    for glyph, label in (("W", "weights"), ("K", "main KV"), ("R", "reserve")):
        assert f"{glyph} {label} " in legend


def test_markdown_has_no_empty_heading_or_blank_header_row() -> None:
    # Regression: an empty "### " heading (untitled sections) and header rows of blank names
    runner = CliRunner(env={"KVPLAN_FORMAT": None})
    for args in (["deployments", "list"], ["models", "show", "glm-5.3"], ["prefix", "--ctx", "1M", "--hit", "1K"]):
        md = runner.invoke(app, [*args, "--format", "markdown"]).stdout
        assert "### \n" not in md and not any(line.strip() == "###" for line in md.splitlines())
        table = runner.invoke(app, args).stdout
        assert not any(line.strip() == "" and len(line) > 0 for line in table.splitlines()), args

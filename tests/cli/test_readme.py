"""Every figure README quotes comes with the command that prints it, and here each such command is run.

The marker (README "How README figures are checked"): in a ```console block, a line `$ kvplan ARGS  # exit N`
is a command with its expected exit code; the lines after it, up to the next `$` line, must each appear in the
command's output with whitespace collapsed (rendered at 200 columns so that nothing wraps).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COMMAND = re.compile(r"^\$ kvplan (?P<args>.*?)\s+# exit (?P<code>\d+)\s*$")


@dataclass(frozen=True)
class Example:
    line: int
    args: tuple[str, ...]
    code: int
    expected: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"README:{self.line}"


def _flat(text: str) -> str:
    return " ".join(text.split())


def examples(text: str) -> list[Example]:
    """The console blocks' commands; a `$ kvplan` line without its `# exit N` is an error here, not skipped."""
    out: list[Example] = []
    in_console = False
    current: tuple[int, list[str], int] | None = None
    expected: list[str] = []

    def close() -> None:
        nonlocal current, expected
        if current is not None:
            out.append(Example(current[0], tuple(current[1]), current[2], tuple(expected)))
        current, expected = None, []

    for n, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            close()
            in_console = line.strip() == "```console"
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            close()
            m = COMMAND.match(line)
            assert m, f"README:{n}: a console command needs '# exit N': {line!r}"
            current = (n, shlex.split(m["args"]), int(m["code"]))
        elif line.strip() and line.strip() != "..." and current is not None:
            expected.append(_flat(line))
    close()
    return out


EXAMPLES = examples(README.read_text(encoding="utf-8"))


def test_readme_has_commands_for_its_figures() -> None:
    # at least the main job, the published-figure checks and the offload recipe
    assert len(EXAMPLES) >= 20
    assert any(e.args[:3] == ("admit", "--ctx", "1M") for e in EXAMPLES)
    assert all(e.expected for e in EXAMPLES), [e.id for e in EXAMPLES if not e.expected]


def test_inline_commands_are_checked_commands_too() -> None:
    """A complete `kvplan ...` quoted in the prose (no placeholders) must be one of the checked commands."""
    text = README.read_text(encoding="utf-8")
    checked = {" ".join(e.args) for e in EXAMPLES}
    unchecked = []
    for m in re.finditer(r"`kvplan ([^`]+)`", text):
        args = m[1]
        if re.search(r"[A-Z]{2,}|\[|\||\.\.\.|\bN\b|\bL\b|\bP\b", args) or "--" not in args:
            continue  # a synopsis (kvplan admit --ctx N [--gen N]) or a command name without options
        if args not in checked:
            unchecked.append(args)
    assert not unchecked, f"quoted in README but not run by this test: {unchecked}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_readme_command(example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    for arg in example.args:
        if arg.startswith("../shared/") and not (ROOT / arg).exists():
            pytest.skip(f"{arg} is not here (../shared beside the repository)")
    if example.args[0] in ("probe", "validate"):
        pytest.importorskip("torch")  # the probe extra; without it these commands exit 3
    monkeypatch.chdir(ROOT)
    r = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"}).invoke(app, list(example.args))
    detail = f"{example.id}: kvplan {' '.join(example.args)}\nexit {r.exit_code}\n{r.stdout[-3000:]}{r.stderr}"
    assert r.exit_code == example.code, detail
    output = _flat(r.stdout)
    missing = [e for e in example.expected if e not in output]
    assert not missing, f"{detail}\nnot in the output: {missing}"

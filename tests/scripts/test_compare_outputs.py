"""scripts/compare_outputs.py itself: it finds README's commands and reports every stream that differs."""

from __future__ import annotations

from pathlib import Path

from tests.scripts._load import load

co = load("kvplan_compare_outputs", "scripts/compare_outputs.py")


def test_readme_commands_are_the_console_commands_each_once(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "```console\n$ kvplan budget --set tp=4      # exit 0\nfigure\n$ kvplan admit --ctx 1M   # exit 1\n```\n"
        "```\n$ kvplan knobs   # exit 0\n```\n```console\n$ kvplan budget --set tp=4  # exit 0\n```\n",
        encoding="utf-8",
    )
    # admit --ctx 1M first (always compared), then README order; a plain ``` block is not a console block
    assert co.readme_commands(readme) == [("admit", "--ctx", "1M"), ("budget", "--set", "tp=4")]


def test_each_differing_stream_is_reported() -> None:
    same = co.Output(0, b"a\nb\n", b"")
    assert co.differences(same, same) == []
    diffs = co.differences(co.Output(1, b"a\nc\n", b"warn\n"), same)
    assert diffs[0] == "exit code: reference 0, this checkout 1"
    assert "-b" in diffs[1] and "+c" in diffs[1]
    assert "+warn" in diffs[2]
    # a difference a line diff cannot show (a missing final newline) is still a difference
    assert len(co.differences(co.Output(0, b"a\nb", b""), same)) == 1


def test_a_reference_that_is_not_a_checkout_is_exit_2(tmp_path: Path) -> None:
    assert co.main([str(tmp_path)]) == 2

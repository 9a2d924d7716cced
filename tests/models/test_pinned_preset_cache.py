"""Mutation survivors of kvplan.models.preset_cache pinned (issue 26; scripts/mutate.py, every mutant, seed 59230):
where an entry lives, what its file looks like and who may write it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvplan.models.preset_cache import builtin_doc, entry_path, entry_text
from kvplan.models.reader import parse_text


@pytest.fixture
def no_umask() -> Iterator[None]:
    """umask 0 while the test runs, so a file's mode is the one the code asked for, not the shell's mask of it."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_an_entry_lives_where_python_keeps_bytecode() -> None:
    # CACHE's docstring: __pycache__/models/glm-5.3.json for models/glm-5.3.yaml, the YAML's suffix dropped (as
    # Python's own __pycache__/x.cpython-311.pyc drops .py); a name with a dot keeps it, only the suffix goes
    root = Path("/cfg")
    assert entry_path(root, "models/glm-5.3.yaml") == Path("/cfg/__pycache__/models/glm-5.3.json")
    assert entry_path(root, "gpus.yaml") == Path("/cfg/__pycache__/gpus.json")


def test_an_entry_is_one_line_of_json_ending_in_a_newline() -> None:
    # a POSIX text file: its one line ends in "\n" (cat, wc -l and diff read it as a whole line)
    text = "a: 1\nb: [2, 3]\n"
    body = entry_text(parse_text(text, "s"), text)
    assert body.endswith("}\n") and body.count("\n") == 1


def test_an_entry_is_written_read_only_to_everyone_but_its_owner(tmp_path: Path, no_umask: None) -> None:
    # rw-r--r-- (0o644, asked for in os.open itself): an entry others could write would let them set the numbers
    # of every later plan (data and lines are read from it without yaml), and no entry is executable
    (tmp_path / "a.yaml").write_text("a: 1\n", encoding="utf-8")
    builtin_doc(tmp_path, "a.yaml", "s")
    mode = stat.S_IMODE(entry_path(tmp_path, "a.yaml").stat().st_mode)
    assert mode == 0o644, oct(mode)

"""A signal that lands right after the temporary file is created leaves no stray file (kvplan.fsio.atomic_file).

Before, the temporary file came from tempfile.mkstemp, which creates the file and only then returns its name: a
SIGINT between the two (seen once in 20 kills of `kvplan lock` under load, tests/cli/test_lock_writes.py) left a
`.NAME.*.tmp` behind. Now the name is chosen first; here the creation itself is followed by a KeyboardInterrupt.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvplan import fsio


def test_interrupt_right_after_creation_removes_the_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "kvplan.lock"
    target.write_text("old")
    real_open = os.open

    def open_then_interrupt(path: str, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        os.close(fd)
        raise KeyboardInterrupt  # the signal arrives once the file exists, before its descriptor is returned

    monkeypatch.setattr(os, "open", open_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        fsio.write_atomic(target, "new", "lock file")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["kvplan.lock"]

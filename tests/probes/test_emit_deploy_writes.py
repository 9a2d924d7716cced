"""`kvplan probe --emit-deploy` writes through kvplan/fsio.py (issue 10): a failed write keeps the old file whole,
and a symlink, a folder or the --deploy file itself is refused before NVML is read."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.probes import nvml as probe_nvml
from tests.probes.fake_nvml import FakeGpu, FakeNvml

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def test_a_full_disk_keeps_the_old_deploy_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_nvml, "load_nvml", lambda: FakeNvml([FakeGpu()]))
    out = tmp_path / "here.yaml"
    out.write_text("my hand-tuned deployment\n")

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    r = runner.invoke(app, ["probe", "--emit-deploy", str(out)])
    assert r.exit_code == 2, r.stdout + r.stderr
    assert r.stderr.startswith("kvplan: error: --emit-deploy") and "No space left" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert out.read_text() == "my hand-tuned deployment\n"  # was truncated by write_text before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here.yaml"]  # the temporary file is gone


def test_emit_deploy_replaces_a_regular_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_nvml, "load_nvml", lambda: FakeNvml([FakeGpu()]))
    out = tmp_path / "here.yaml"
    out.write_text("old\n")
    r = runner.invoke(app, ["probe", "--emit-deploy", str(out)])
    assert r.exit_code == 0, r.stderr
    assert out.read_text().startswith("schema_version: ") and "pre_load_free:" in out.read_text()

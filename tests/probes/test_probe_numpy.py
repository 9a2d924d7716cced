"""torch without numpy (issue 9, item 23): `torchrun ... kvplan validate` crashed in gather_object, and torch's
"Failed to initialize NumPy" warning is an error where warnings are errors (the test suite, -W error)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.errors import ProbeUnavailable

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
NO_NUMPY = "import sys; sys.modules['numpy'] = None\n"


def _py(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", NO_NUMPY + code], capture_output=True, text=True, env=env, timeout=120
    )


def test_torch_imports_quietly_without_numpy() -> None:
    r = _py("from kvplan.probes.validate import load_torch\nload_torch()\nprint('ok')")
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr[-2000:]
    # the warning is torch's own: a bare import under -W error fails, so the test above can fail
    assert _py("import torch").returncode != 0


def test_gather_without_numpy_is_probe_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvplan.probes.validate import need_numpy

    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(ProbeUnavailable, match=r"needs numpy: pip install 'kvplan-llm\[probe\]'"):
        need_numpy()

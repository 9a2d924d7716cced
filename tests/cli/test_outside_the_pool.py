"""`kvplan workspace`, `kvplan prefix`, `kvplan transfer` from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def run(*args: str) -> Result:
    return runner.invoke(app, list(args))


def as_json(*args: str, code: int = 0) -> dict[str, Any]:
    r = run(*args, "--format", "json")
    assert r.exit_code == code, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert isinstance(data, dict)
    return data


def test_workspace_fits_and_names_the_walls() -> None:
    d = as_json("workspace", "--batch", "4", "--ctx", "128K")
    assert d["fits"] is True
    walls = {w["knob"]: w for w in d["walls"]}
    # 8,869 pages // 2,048 pages a request = 4 (see tests/unit/test_workspace.py)
    assert walls["batch"]["largest_fitting"] == 4 and walls["batch"]["breaks"] == "pool pages"
    assert isinstance(d["workspace"]["peak_bytes"], int)


def test_workspace_rejects_a_batch_the_pool_cannot_hold() -> None:
    d = as_json("workspace", "--batch", "5", "--ctx", "128K", code=1)
    assert d["fits"] is False


def test_workspace_markdown() -> None:
    r = run("workspace", "--format", "markdown")
    assert r.exit_code in (0, 1) and r.stdout.startswith("## ")


def test_prefix_json() -> None:
    d = as_json("prefix", "--ctx", "1M", "--hit", "100000", "--sweep", "4")
    assert (d["reusable_tokens"], d["pairs_saved"], d["saved_ppm"]) == (99_968, 4_996_850_496, 9_089)
    # sweep at 0, 262,144, 524,288, 786,432 and 1,048,576 (capped at L − 1 -> 1,048,512 reused)
    assert [x["hit_tokens"] for x in d["sweep"]] == [0, 262_144, 524_288, 786_432, 1 << 20]
    assert d["sweep"][-1]["reusable_tokens"] == (1 << 20) - 64


def test_prefix_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.png"
    r = run("prefix", "--ctx", "1M", "--hit", "100000", "--sweep", "8", "--plot", str(out))
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_transfer_offload_recipe() -> None:
    d = as_json("transfer", "--ctx", "138615", "--unit", "chunk:256", "--deploy", "glm-5.3-8xh200-vllm")
    assert d["total_bytes"] == 59_763_793_920
    assert d["moved_tokens"] == 138_496


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("prefix", "--ctx", "1000", "--hit", "2000"), "longer than --ctx"),
        (("prefix", "--ctx", "0"), "--ctx"),
        (("prefix", "--ctx", "1M", "--plot", "x.png"), "--sweep"),
        (("transfer", "--ctx", "1M", "--link", "400"), "--link"),
        (("transfer", "--ctx", "1M", "--unit", "blocks"), "--unit"),
        (("transfer", "--ctx", "-5"), "--ctx"),
        (("workspace", "--batch", "0"), "--batch"),
        (("workspace", "--ctx", "abc"), "--ctx"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], needle: str) -> None:
    r = run(*args)
    assert r.exit_code == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error:") and needle in lines[0], r.stderr
    assert r.stdout == ""

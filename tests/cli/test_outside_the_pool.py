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
    # 8,869 pages // 2,048 pages a request = 4 (see tests/plan/test_workspace.py)
    assert walls["batch"]["largest_fitting"] == 4 and walls["batch"]["breaks"] == "pool pages"
    assert isinstance(d["workspace"]["peak_bytes"], int)


def test_workspace_verdict_is_about_workspaces_the_pool_is_context() -> None:
    # Regression: 5 × 128K requests need 5 × 2,048 = 10,240 pages > the pool's 8,869, and the command exited 1
    # "DOES NOT FIT: the pool" although the workspaces fit. The pool is now context, the verdict the workspaces.
    d = as_json("workspace", "--batch", "5", "--ctx", "128K", code=0)
    assert d["fits"] is True and d["workspace"]["pool_fits"] is False
    out = run("workspace", "--batch", "5", "--ctx", "128K").stdout
    assert out.splitlines()[1].startswith("FITS: ")
    assert "10,240 / 8,869" in out  # pages needed / usable, shown as context


def test_workspace_with_no_options_fits_at_a_context_the_pool_holds() -> None:
    # Regression: `kvplan workspace` exited 1 "DOES NOT FIT: the pool" (1M context > the 567,616-token pool)
    # while the workspaces fit. Default context: 8,869 usable pages × 64 tokens = 567,616.
    r = run("workspace")
    assert r.exit_code == 0, r.stdout + r.stderr
    d = as_json("workspace")
    w = d["workspace"]
    assert (w["ctx"], w["pool_fits"], d["fits"]) == (567_616, True, True)
    # peak = persistent + the larger phase, and FITS quotes peak and room (the 13.75 of 15.82 GiB)
    items = w["items"]
    persistent = sum(i["bytes"] for i in items if i["phase"] == "persistent")
    phases = [sum(i["bytes"] for i in items if i["phase"] == ph) for ph in ("prefill", "decode")]
    assert w["peak_bytes"] == persistent + max(phases)
    gib = 1 << 30
    assert r.stdout.splitlines()[1] == (
        f"FITS: {w['peak_bytes'] / gib:,.2f} GiB of workspaces in {w['room_bytes'] / gib:,.2f} GiB, "
        f"{w['left_bytes'] / gib:,.2f} GiB left"
    )
    assert r.stdout.splitlines()[1].startswith("FITS: 13.75 GiB of workspaces in 15.82 GiB")


def test_workspace_rejects_when_the_workspaces_do_not_fit() -> None:
    # 2,048 requests × (1 + 3 draft) rows × 262,144 keys × 4 B = 8 GiB of decode logits (unbudgeted by SGLang),
    # on top of req_to_token 8,594,161,680 B and CUDA graphs 2,684,354,560 B: past the 15.82 GiB slack
    d = as_json("workspace", "--batch", "2048", "--mtp", "3", "--ctx", "256K", code=1)
    items = {i["name"]: i["bytes"] for i in d["workspace"]["items"]}
    assert items["decode logits"] == 2048 * 4 * 262_144 * 4 == 8 << 30
    assert d["fits"] is False and d["workspace"]["left_bytes"] < 0
    line = run("workspace", "--batch", "2048", "--mtp", "3", "--ctx", "256K").stdout.splitlines()[1]
    assert line.startswith("DOES NOT FIT: ") and "of workspaces in 15.82 GiB" in line


def test_workspace_help_example_runs_and_fits() -> None:
    # Regression: the example in `kvplan workspace --help` exited 1 for a pool reason.
    help_text = run("workspace", "--help").stdout
    example = next(line.strip() for line in help_text.splitlines() if "Example: kvplan workspace" in line)
    r = run(*example.removeprefix("Example: kvplan ").split())
    assert r.exit_code == 0, r.stdout + r.stderr


def test_workspace_names_the_smaller_last_chunk() -> None:
    # 8,192 rows × 131,072 keys × 4 B = 4 GiB > SGLang's budget min(int(int(150,109,945,856 × 0.114) × 0.2), ...)
    # = 3,422,506,765 B: 3,422,506,765 // 524,288 = 6,527 rows a chunk, the last 8,192 − 6,527 = 1,665 rows
    # = 872,939,520 B = 832.50 MiB (872.94 MB); a full chunk 6,527 × 524,288 = 3,421,503,488 B = 3.19 GiB
    out = " ".join(run("workspace", "--ctx", "128K").stdout.split())
    assert "2 chunks: 1 of 3.19 GiB (3.42 GB), the last (1,665 rows) of 832.50 MiB (872.94 MB)" in out
    assert "each" not in out


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

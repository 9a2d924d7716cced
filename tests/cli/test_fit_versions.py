"""Issue 16 item 4: `kvplan diff --engine-version OLD NEW CONFIG...` and `kvplan gate --against-version V`.

Figures (derivations in tests/cli/test_gate.py and tests/plan/test_fit.py): the glm-5.3-8xh200-sglang preset at
SGLang 0.5.23 holds 567,616 tokens (cell 656 × 78 + 132 × 21 = 53,940 B: the indexer K on the 21 full layers).
At 0.5.9 (kvplan.versions): the indexer K on every layer and the raw fp8 row, cell 576 × 78 + 132 × 78 =
55,224 B; no MLA prefill-graph reserve, so the budget is test_gate's 32,259,822,321 B: // 55,224 = 584,163 ->
584,128 rows of 64. 0.5.9 has no decode context parallel, so base.yaml (dcp 2) does not start there.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from kvplan.cli import app

DATA = Path(__file__).parents[1] / "data" / "gate"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})


def run(*args: str) -> Result:
    return runner.invoke(app, list(args))


def test_diff_engine_version_one_row_per_config() -> None:
    base = str(DATA / "base.yaml")
    r = run("diff", "--engine-version", "0.5.9", "0.5.23", base, "glm-5.3-8xh200-sglang", "--format", "json")
    assert r.exit_code == 0, r.output
    rows = {Path(c["config"]).name: c for c in json.loads(r.output)["configs"]}
    assert set(rows) == {"base.yaml", "glm-5.3-8xh200-sglang"}
    old, new = rows["glm-5.3-8xh200-sglang"]["old"], rows["glm-5.3-8xh200-sglang"]["new"]
    assert (old["engine_version"], new["engine_version"]) == ("0.5.9", "0.5.23")
    assert old["cell_bytes"] == 576 * 78 + 132 * 78 == 55_224  # the indexer on all 78 layers at 0.5.9
    assert new["cell_bytes"] == 656 * 78 + 132 * 21 == 53_940 and new["pool_tokens"] == 567_616
    b = rows["base.yaml"]
    assert not b["old"]["starts"] and "no decode context parallel" in b["old"]["startup_error"]
    assert b["new"]["pool_tokens"] == 1_278_208


def test_diff_engine_version_per_engine_and_bad_versions() -> None:
    r = run("diff", "--engine-version", "sglang=0.5.9,vllm=0.11.0", "sglang=0.5.23,vllm=0.33.0",
            "glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "0.11.0 -> 0.33.0" in r.output and "0.5.9 -> 0.5.23" in r.output
    bad = run("diff", "--engine-version", "0.5.9", "0.5.23", "glm-5.3-8xh200-vllm")
    assert bad.exit_code == 2 and "--engine-version 0.5.9 for glm-5.3-8xh200-vllm" in bad.output
    assert run("diff", "--engine-version", "x=1", "0.5.23", "glm-5.3-8xh200-sglang").exit_code == 2
    assert run("diff", "glm-5.3-8xh200-sglang").exit_code == 2  # OLD NEW without --engine-version


def test_gate_against_version_fails_when_the_engine_refuses() -> None:
    r = run("gate", str(DATA / "base.yaml"), "--against-version", "0.5.9")
    assert r.exit_code == 1, r.output
    assert "SGLang 0.5.9 has no decode context parallel" in r.output


def test_gate_against_version_checks_capacity_and_requirements() -> None:
    # same version: nothing changes, the requirements hold -> pass
    ok = run("gate", str(DATA / "base.yaml"), "--against-version", "0.5.23", "--format", "json")
    assert ok.exit_code == 0, ok.output
    res = json.loads(ok.output)["results"][0]
    assert res["before"]["pool_tokens"] == res["after"]["pool_tokens"] == 1_278_208
    # 0.5.23 -> 0.5.9 on the preset: 567,616 -> 584,128 tokens, but 512K is then rejected (the workspace)
    r = run("gate", "glm-5.3-8xh200-sglang", "--against-version", "0.5.9", "--require-ctx", "512K", "--format", "json")
    assert r.exit_code == 1
    res = json.loads(r.output)["results"][0]
    assert res["before"]["pool_tokens"] == 567_616 and res["after"]["pool_tokens"] == 584_128
    failed = [x["name"] for x in res["rules"] if not x["ok"]]
    assert failed == ["admits 524,288 tokens"]
    assert run("gate", "glm-5.3-8xh200-sglang", "--against-version", "0.5.9", "--lock", "x.lock").exit_code == 2

"""A lock that cannot be forged into a pass (issue 25 item 2).

Before: editing an entry of a lock kvplan wrote to `pool_tokens: 0`, `cell_bytes: 0`, `available_bytes: -5`,
`workspace_left_bytes: -5`, `engine: "tgi 1.0"` or `mla_layout: "int3"` kept every field inside its type and
bounds, so `kvplan gate` said GATE PASSED, exit 0 (`pool 0 -> … tokens (+…%)`). Now each entry is checked
against the relations `figures` builds into it (kvplan/plan/lock_check.py) and the lock carries a SHA-256 of its
entries: any field changed by hand is exit 2 naming the field or the digest.

Numbers: tests/data/gate/base.yaml locks 1,278,208 pool tokens = 639,104 rows per GPU × dcp 2, and 50,472 B a
row (tests/cli/test_gate.py derives them from SGLang's calculate_pool_sizes).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.cli._common import load_plan
from kvplan.plan.gate import DEFAULT_CONTEXTS, figures, is_new, lock_text, parse_lock

DATA = Path(__file__).parents[1] / "data" / "gate"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})


def run(*args: str) -> Result:
    return runner.invoke(app, list(args))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(DATA / "base.yaml", tmp_path / "prod.yaml")
    shutil.copy(DATA / "indexer39.yaml", tmp_path / "other.yaml")
    shutil.copy(DATA / "glm-5.3-39-indexer-layers.yaml", tmp_path / "glm-5.3-39-indexer-layers.yaml")
    monkeypatch.chdir(tmp_path)
    assert run("lock", "prod.yaml").exit_code == 0
    return tmp_path


def _edit(repo: Path, **fields: Any) -> None:
    doc = json.loads((repo / "kvplan.lock").read_text())
    doc["configs"]["prod.yaml"].update(fields)
    (repo / "kvplan.lock").write_text(json.dumps(doc, indent=2))


def _one_error(r: Result, needle: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert r.stderr.startswith("kvplan: error: kvplan.lock") and len(r.stderr.splitlines()) == 1, r.stderr
    assert needle in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        # the seven forgeries (each GATE PASSED, exit 0, before)
        ({"pool_tokens": 0}, "pool_tokens: 0, but pool_rows_per_gpu × dcp is 1,278,208"),
        (
            {"cell_bytes": 0},
            "cell_bytes: 0, but main_bytes_per_row + indexer_bytes_per_row + draft_bytes_per_row is 50,472",
        ),
        ({"available_bytes": -5}, "available_bytes: -5 is under 1, but engine_starts is true"),
        ({"workspace_left_bytes": -5}, "edited by hand (digest mismatch)"),  # a headroom may be negative
        ({"engine": "tgi 1.0"}, "engine: 'tgi 1.0' is not an engine kvplan plans"),
        ({"mla_layout": "int3"}, "mla_layout: 'int3' is not a KV format"),
        ({"engine": "sglang ٠.٥.٢٣"}, "has no version of ASCII digits"),  # Arabic-Indic digits
        # the relations between fields, each kept by a consistent edit only the digest tells apart
        ({"pool_tokens": 1_278_208 // 2, "pool_rows_per_gpu": 639_104 // 2}, "usable_pages: 9,986 pages of 64"),
        ({"max_running_requests": 2047}, "digest mismatch"),
        ({"pool_rows_per_gpu": 639_104 + 1, "pool_tokens": 2 * (639_104 + 1)}, "is not whole pages"),
        ({"usable_pages": 10**9}, "usable_pages"),
        ({"largest_admitted_ctx": 2_000_000}, "largest_admitted_ctx: 2,000,000 is over pool_tokens"),
        ({"concurrency": {"131072": 4, "1048576": 1, "4194304": 1}}, "concurrency.4194304"),
        ({"logical_page_tokens": 64}, "logical_page_tokens: 64, but rank_page_tokens × dcp is 128"),
        ({"engine_starts": False}, "largest_admitted_ctx: 1,048,576 but engine_starts is false"),
    ],
)
def test_forged_entries_fail_the_gate(repo: Path, fields: dict[str, Any], needle: str) -> None:
    _edit(repo, **fields)
    _one_error(run("gate", "prod.yaml"), needle)


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return {"sglang 0.5.23": "sglang 0.5.9", "fp8_ds_mla": "bf16"}.get(value, value + "x")
    return {k: v + 1 for k, v in value.items()}


def test_any_field_changed_by_hand_is_exit_2(repo: Path) -> None:
    """Done-when: a lock with any field changed by hand fails the gate with exit 2 naming the field or digest."""
    good = (repo / "kvplan.lock").read_text()
    entry = json.loads(good)["configs"]["prod.yaml"]
    for key, value in entry.items():
        (repo / "kvplan.lock").write_text(good)
        _edit(repo, **{key: _changed(value)})
        r = run("gate", "prod.yaml")
        assert r.exit_code == 2, (key, r.stdout)
        assert key in r.stderr or "digest mismatch" in r.stderr, (key, r.stderr)


def test_a_reformatted_lock_is_still_kvplans(repo: Path) -> None:
    """The digest is of the entries as canonical JSON: indentation and key order are not edits."""
    doc = json.loads((repo / "kvplan.lock").read_text())
    (repo / "kvplan.lock").write_text(json.dumps(dict(reversed(list(doc.items())))))
    assert run("gate", "prod.yaml").exit_code == 0


def test_lock_rebuilds_an_edited_lock_but_never_signs_its_other_entries(repo: Path) -> None:
    assert run("lock", "other.yaml").exit_code == 0
    _edit(repo, workspace_left_bytes=-5)
    # re-locking other.yaml alone would keep the forged prod.yaml entry under a fresh digest: refused
    r = run("lock", "other.yaml")
    _one_error(r, "was edited by hand (digest mismatch): its entries for prod.yaml cannot be kept")
    assert run("lock", "other.yaml", "prod.yaml").exit_code == 0  # every entry recomputed: rebuilt
    assert run("gate", "prod.yaml").exit_code == 0
    _edit(repo, workspace_left_bytes=-5)
    assert run("lock", "other.yaml", "--prune").exit_code == 0  # or dropped
    assert set(json.loads((repo / "kvplan.lock").read_text())["configs"]) == {"other.yaml"}


def test_a_pool_from_zero_is_new_not_a_percentage(repo: Path) -> None:
    """A config whose engine did not start locks pool 0; once it starts the change is "new" (was +33,056,000%)."""
    text = (repo / "prod.yaml").read_text()
    (repo / "prod.yaml").write_text(text + "weights_per_gpu: 135GiB\n")  # leaves no KV budget on an H200: no start
    assert run("lock", "prod.yaml").exit_code == 0
    assert json.loads((repo / "kvplan.lock").read_text())["configs"]["prod.yaml"]["pool_tokens"] == 0
    (repo / "prod.yaml").write_text(text)
    r = run("gate", "prod.yaml")
    assert r.exit_code == 0, r.stderr
    assert "pool 0 -> 1,278,208 tokens (new)" in r.stdout, r.stdout
    assert "%)" not in r.stdout.split("pool 0 -> ")[1].splitlines()[0]
    doc = json.loads(run("gate", "prod.yaml", "--format", "json").stdout)
    assert doc["results"][0]["capacity_change_ppm"] is None


def test_near_zero_baseline_is_new() -> None:
    # 1 -> 330,560 would print +33,055,900.00%; more than 100× the baseline is "new"
    assert is_new(0, 330_560) and is_new(1, 330_560) and is_new(3_305, 330_560)
    assert not is_new(3_306, 330_560) and not is_new(1_278_208, 1_168_256) and not is_new(0, 0)


@pytest.mark.parametrize(
    ("model", "deploy"),
    [
        ("glm-5.3", "glm-5.3-8xh200-sglang"),
        ("glm-5.3", "glm-5.3-8xh200-vllm"),
        ("glm-5.3-flash", "glm-5.3-8xh200-vllm"),  # vLLM hybrid: logged tokens under rows × dcp
        ("deepseek-v4-flash", "glm-5.3-8xh200-vllm"),
        ("deepseek-v4-flash", "glm-5.3-8xh200-sglang"),
        ("gpt-oss-120b", "glm-5.3-8xh200-vllm"),  # its engine does not start: pool and admissions 0
        ("qwen3-next-80b-a3b", "glm-5.3-8xh200-sglang"),
    ],
)
def test_every_lock_kvplan_writes_reads_back(model: str, deploy: str) -> None:
    """The relations are the ones `figures` builds: no lock kvplan writes is refused (594 plans of every preset
    model × deployment × 8 knob sets were checked when the relations were chosen; these are the hybrids)."""
    f = figures(load_plan(model, deploy, None), DEFAULT_CONTEXTS)
    assert parse_lock(lock_text({"x.yaml": f}), "x.lock") == {"x.yaml": f}

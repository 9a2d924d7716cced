"""`kvplan lock`, `kvplan gate`, `kvplan diff` end to end on the configs in tests/data/gate/.

Numbers for base.yaml (GLM-5.3, SGLang 0.5.23, TP8, dcp 2, fp8): dcp > 1 disables the prefill graph, so
mem_fraction_static = round((143,771 − 14,848) / 143,771, 3) = 0.897; pre-load free = 143,156 MiB − 1 GiB =
149,036,204,032 B; weights 94.46 GiB = 101,425,652,695 B; available = int(((149,036,204,032 − 101,425,652,695) / 2^30
− 138.80078125 × 0.103) × 2^30) = 32,259,822,321 B.
- base: dcp 2 -> trtllm rows of 576 B: cell = 576 × 78 + 132 × 21 × 2 = 50,472 B;
  32,259,822,321 // 50,472 = 639,162 -> 639,104 rows -> logged 1,278,208 tokens (admits 1M).
- 39 indexer layers: cell = 44,928 + 132 × 39 × 2 = 55,224 B -> 584,163 -> 584,128 rows -> 1,168,256 tokens:
  (1,168,256 − 1,278,208) / 1,278,208 = −8.60 %.
- bf16: cell = 1,152 × 78 + 5,544 = 95,400 B -> 338,152 -> 338,112 rows -> 676,224 tokens < 1,048,576.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.plan.gate import parse_lock_untrusted
from kvplan.plan.lock_check import entries_digest

DATA = Path(__file__).parents[1] / "data" / "gate"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, list(args), env=env)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config repository: prod.yaml (= base.yaml) and the 39-layer model, locked."""
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path / f.name)
    shutil.copy(DATA / "base.yaml", tmp_path / "prod.yaml")
    monkeypatch.chdir(tmp_path)
    r = run("lock", "prod.yaml")
    assert r.exit_code == 0, r.stdout + r.stderr
    return tmp_path


def test_lock_records_the_figures(repo: Path) -> None:
    doc = json.loads((repo / "kvplan.lock").read_text())
    entry = doc["configs"]["prod.yaml"]
    assert doc["schema_version"] == 3  # 3 (issue 25): the lock carries the digest of its entries
    assert doc["digest"] == entries_digest(doc["configs"])
    assert (entry["cell_bytes"], entry["pool_rows_per_gpu"], entry["pool_tokens"]) == (50_472, 639_104, 1_278_208)
    assert entry["largest_admitted_ctx"] == 1 << 20
    # promised contexts from requirements: 128K (4@128K) and 1M
    assert set(entry["concurrency"]) == {"131072", "1048576"}
    # stable key order: re-locking gives the same bytes
    before = (repo / "kvplan.lock").read_bytes()
    assert run("lock", "prod.yaml").exit_code == 0
    assert (repo / "kvplan.lock").read_bytes() == before


def test_unchanged_config_passes(repo: Path) -> None:
    r = run("gate", "prod.yaml", "--max-capacity-drop", "2%")
    assert r.exit_code == 0, r.stdout
    assert "GATE PASSED" in r.stdout


def test_more_indexer_layers_fail_a_2_percent_rule(repo: Path) -> None:
    shutil.copy(repo / "indexer39.yaml", repo / "prod.yaml")
    r = run("gate", "prod.yaml", "--max-capacity-drop", "2%", "--format", "markdown")
    assert r.exit_code == 1, r.stdout
    md = r.stdout
    assert md.startswith("## kvplan gate")
    # the first failed rule comes first (issue 29's first screen: before any heading), in tokens, with the size
    # of the drop and its fix; then the table of every failed rule
    first_screen = md.split("### ")[0]
    assert "| binding check | prod.yaml: capacity drop <= 2%: pool 1,278,208 -> 1,168,256 tokens (-8.60%) |" in (
        first_screen
    )
    assert "kvplan lock prod.yaml" in first_screen
    failed = next(s for s in md.split("### ") if s.startswith("Failed rules"))
    assert "pool 1,278,208 -> 1,168,256 tokens (-8.60%)" in failed
    # the points are compared; the band (issue 28) stands beside the pool now. SGLang 0.5.23 on H200: pre-load
    # free 149,036,204,032 B (CUDA total − the assumed 1 GiB) ±15,540 ppm (engines/band.ERRORS, SGLang on
    # Hopper/Blackwell) = ±2,316,022,610 B; available = pre_load_free × 0.897 − 101,425,652,695 (model_runner.py,
    # GiB floats) = 30,182,350,040 / 34,337,294,602 B; // cell 55,224 // 64 × 64 × dcp 2 = 1,092,992 / 1,243,520
    assert (
        "| pool tokens (logical) | 1,278,208 | 1,168,256 (band 1,092,992 – 1,243,520: pre-load free estimated ±1.6 %) "
        "| -8.60% |" in md
    )


def test_bf16_fails_require_ctx_1m(repo: Path) -> None:
    shutil.copy(repo / "bf16.yaml", repo / "prod.yaml")
    r = run("gate", "prod.yaml", "--require-ctx", "1M", "--max-capacity-drop", "100%", "--format", "json")
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    rules = {x["name"]: x for x in d["results"][0]["rules"]}
    assert not rules["admits 1,048,576 tokens"]["ok"]
    assert d["results"][0]["after"]["pool_tokens"] == 676_224


def test_requirements_live_in_the_config(repo: Path) -> None:
    # base.yaml promises ctx 1M and 4@128K; the bf16 copy keeps the promise and breaks it without any CLI flag
    shutil.copy(repo / "bf16.yaml", repo / "prod.yaml")
    (repo / "kvplan.lock").unlink()
    r = run("gate", "prod.yaml", "--format", "json")
    assert r.exit_code == 1
    names = [x["name"] for x in json.loads(r.stdout)["results"][0]["rules"] if not x["ok"]]
    assert names == ["admits 1,048,576 tokens"]


def test_github_annotations(repo: Path) -> None:
    shutil.copy(repo / "indexer39.yaml", repo / "prod.yaml")
    r = run("gate", "prod.yaml", "--max-capacity-drop", "2%", env={"GITHUB_ACTIONS": "true"})
    assert r.exit_code == 1
    # annotations go to stderr only: in markdown mode stdout is the PR comment (issue 9, item 12)
    assert "::error file=prod.yaml,title=kvplan gate::capacity drop <= 2%25: pool 1,278,208 -> 1,168,256" in r.stderr
    assert "::error" not in r.stdout


def test_github_annotations_never_on_stdout_in_markdown(repo: Path) -> None:
    shutil.copy(repo / "indexer39.yaml", repo / "prod.yaml")
    r = run("gate", "prod.yaml", "--max-capacity-drop", "2%", "--format", "markdown", env={"GITHUB_ACTIONS": "true"})
    assert r.exit_code == 1
    assert r.stdout.startswith("## kvplan gate") and "::error" not in r.stdout
    assert r.stderr.count("::error file=prod.yaml") == 1


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema_version": 4, "configs": {}}', "newer kvplan"),
        # schema 2 had no digest: a lock kvplan wrote then is rebuilt, never trusted (issue 25)
        ('{"schema_version": 2, "configs": {}}', "has no digest"),
        ('{"schema_version": 1, "configs": {"prod.yaml": {"pool_tokens": 1}}}', "missing"),
        ("[]", "not a kvplan lock"),
    ],
)
def test_bad_lock_is_exit_2_never_a_pass(repo: Path, content: str, needle: str) -> None:
    (repo / "kvplan.lock").write_text(content)
    r = run("gate", "prod.yaml")
    assert r.exit_code == 2, r.stdout + r.stderr
    assert r.stderr.startswith("kvplan: error:") and needle in r.stderr and len(r.stderr.splitlines()) == 1


def test_missing_explicit_lock_is_exit_2(repo: Path) -> None:
    r = run("gate", "prod.yaml", "--lock", "nope.lock")
    assert r.exit_code == 2 and "no such lock file" in r.stderr


def test_nothing_to_check_is_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = run("gate", "glm-5.3-8xh200-sglang")
    assert r.exit_code == 2 and "nothing to check" in r.stderr


def test_diff_shows_each_knob_alone(repo: Path) -> None:
    # OLD base (fp8, dcp 2) -> NEW bf16: the one changed knob alone gives NEW's pool, 676,224 tokens (−47.10 %)
    r = run("diff", "base.yaml", "bf16.yaml", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["old_pool_tokens"], d["new_pool_tokens"]) == (1_278_208, 676_224)
    effects = {e["knob"]: e for e in d["effects"]}
    assert set(effects) == {"kv_cache_dtype"}
    assert effects["kv_cache_dtype"]["pool_tokens"] == 676_224


def test_diff_model_change(repo: Path) -> None:
    r = run("diff", "base.yaml", "indexer39.yaml", "--format", "json")
    effects = {e["knob"]: e for e in json.loads(r.stdout)["effects"]}
    assert effects["model"]["pool_tokens"] == 1_168_256


# --------------------------------------------------------------------------- issue 9 / 10: the lock


def test_lock_names_both_page_sizes(repo: Path) -> None:
    # dcp 2: the engine's page is 64 rows on each rank; a request's page spans both ranks, 64 × 2 = 128 tokens.
    # usable_pages counts those: 639,104 rows // 64 = 9,986 pages; 9,986 × 128 = 1,278,208 = pool_tokens.
    entry = json.loads((repo / "kvplan.lock").read_text())["configs"]["prod.yaml"]
    assert "page_tokens" not in entry  # schema 1's ambiguous name next to a count of 128-token pages
    assert (entry["rank_page_tokens"], entry["logical_page_tokens"], entry["dcp"]) == (64, 128, 2)
    assert entry["usable_pages"] == 639_104 // 64 == 9_986
    assert entry["usable_pages"] * entry["logical_page_tokens"] == entry["pool_tokens"] == 1_278_208


def test_schema_1_lock_is_migrated(repo: Path) -> None:
    # a lock written before schema 2: page_tokens was the rank page (64); the logical page is 64 × dcp 2 = 128.
    # It has no digest (schema 3, issue 25): gate refuses it as a baseline, `kvplan lock` reads and rebuilds it.
    doc = json.loads((repo / "kvplan.lock").read_text())
    entry = doc["configs"]["prod.yaml"]
    entry["page_tokens"] = entry.pop("rank_page_tokens")
    del entry["logical_page_tokens"]
    doc["schema_version"] = 1
    del doc["digest"]
    (repo / "kvplan.lock").write_text(json.dumps(doc))
    assert parse_lock_untrusted(json.dumps(doc), "kvplan.lock")[0]["prod.yaml"].logical_page_tokens == 128
    r = run("gate", "prod.yaml", "--format", "json")
    assert r.exit_code == 2 and "kvplan.lock has no digest" in r.stderr, r.stderr
    assert run("lock", "prod.yaml").exit_code == 0
    r = run("gate", "prod.yaml", "--format", "json")
    assert r.exit_code == 0, r.stderr
    before = json.loads(r.stdout)["results"][0]["before"]
    assert (before["rank_page_tokens"], before["logical_page_tokens"]) == (64, 128)


def test_lock_merges_and_keeps_the_other_entries(repo: Path) -> None:
    # `lock prod.yaml indexer39.yaml`, then `lock indexer39.yaml` alone (what gate's advice says to run):
    # prod.yaml keeps its entry, so `gate prod.yaml` still passes (it was exit 2, "no entry").
    assert run("lock", "prod.yaml", "indexer39.yaml").exit_code == 0
    r = run("lock", "indexer39.yaml", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["updated"], d["pruned"]) == (["indexer39.yaml"], [])
    keys = set(json.loads((repo / "kvplan.lock").read_text())["configs"])
    assert keys == {"prod.yaml", "indexer39.yaml"}
    assert run("gate", "prod.yaml").exit_code == 0


def test_lock_prune_drops_the_others(repo: Path) -> None:
    assert run("lock", "prod.yaml", "indexer39.yaml").exit_code == 0
    r = run("lock", "indexer39.yaml", "--prune", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["pruned"] == ["prod.yaml"]
    assert set(json.loads((repo / "kvplan.lock").read_text())["configs"]) == {"indexer39.yaml"}
    r = run("gate", "prod.yaml")
    assert r.exit_code == 2 and "no entry for prod.yaml" in r.stderr


def test_keys_are_relative_to_the_lock(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ./prod.yaml, $PWD/prod.yaml and (from the parent folder) ci/prod.yaml --lock ci/kvplan.lock: one entry
    assert run("gate", "./prod.yaml").exit_code == 0
    assert run("gate", str(repo / "prod.yaml")).exit_code == 0
    monkeypatch.chdir(repo.parent)
    r = run("gate", f"{repo.name}/prod.yaml", "--lock", f"{repo.name}/kvplan.lock")
    assert r.exit_code == 0, r.stderr
    # locking from the parent folder writes the same key: the lock's bytes do not change
    before = (repo / "kvplan.lock").read_bytes()
    assert run("lock", f"{repo.name}/prod.yaml", "--lock", f"{repo.name}/kvplan.lock").exit_code == 0
    assert (repo / "kvplan.lock").read_bytes() == before


def test_config_outside_the_lock_folder_is_keyed_with_dotdot(repo: Path) -> None:
    (repo / "ci").mkdir()
    assert run("lock", "prod.yaml", "--lock", "ci/kvplan.lock").exit_code == 0
    assert list(json.loads((repo / "ci" / "kvplan.lock").read_text())["configs"]) == ["../prod.yaml"]
    assert run("gate", "prod.yaml", "--lock", "ci/kvplan.lock").exit_code == 0


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"schema_version": 0, "configs": {}}', "schema_version: 0 is not a lock schema"),
        ('{"schema_version": -1, "configs": {}}', "schema_version: -1 is not a lock schema"),
        ('{"schema_version": true, "configs": {}}', "expected an integer, got a boolean"),
        ('{"schema_version": 1.5, "configs": {}}', "expected an integer, got a number with a fraction"),
        ("[" * 10_000 + "]" * 10_000, "nested deeper"),
        ('{"schema_version": ' + "1" * 5000 + ', "configs": {}}', "5,000 digits"),
        ('{"schema_version": NaN, "configs": {}}', "NaN is not a number"),
    ],
)
def test_lock_values_are_checked(repo: Path, content: str, needle: str) -> None:
    (repo / "kvplan.lock").write_text(content)
    r = run("gate", "prod.yaml")
    assert r.exit_code == 2, r.stdout + r.stderr
    assert r.stderr.startswith("kvplan: error:") and needle in r.stderr and len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("pool_tokens", -1, "below 0"),
        ("pool_tokens", True, "got a boolean"),
        ("pool_tokens", 1.5, "a number with a fraction"),
        ("dcp", 0, "below 1"),
        ("engine_starts", 1, "expected true or false"),
        ("concurrency", {"131072": "x"}, "expected an integer, got a string"),
        ("concurrency", {"abc": 1}, "is not an integer"),
    ],
)
def test_lock_entry_fields_are_typed(repo: Path, key: str, value: object, needle: str) -> None:
    # each of these passed the gate (or was a traceback) before the strict reader
    doc = json.loads((repo / "kvplan.lock").read_text())
    doc["configs"]["prod.yaml"][key] = value
    (repo / "kvplan.lock").write_text(json.dumps(doc))
    r = run("gate", "prod.yaml")
    assert r.exit_code == 2, r.stdout + r.stderr
    assert f"configs.prod.yaml.{key}" in r.stderr and needle in r.stderr, r.stderr


def test_only_deployments_skips_other_yaml(repo: Path) -> None:
    # what the pre-commit hook passes: every staged YAML, a workflow among them
    (repo / "ci.yml").write_text("name: ci\non: [push]\njobs: {}\n")
    r = run("gate", "--only-deployments", "ci.yml", "glm-5.3-39-indexer-layers.yaml", "prod.yaml")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "skipping ci.yml: not a kvplan deployment config" in r.stderr
    assert "skipping glm-5.3-39-indexer-layers.yaml" in r.stderr  # a model YAML is not a deployment either
    assert "GATE PASSED: 1 config(s)" in r.stdout
    r = run("gate", "--only-deployments", "ci.yml")
    assert r.exit_code == 0 and "no kvplan deployment configs to gate" in r.stderr
    r = run("gate", "ci.yml")  # without the flag a workflow is bad input, as before
    assert r.exit_code == 2


def test_packaging_names(repo: Path) -> None:
    # the distribution is kvplan-llm (kvplan on PyPI is another project; kvplan-dsa read as "DSA only", issue 29);
    # CI's wheel glob and the example follow
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    from kvplan import DIST

    root = Path(__file__).parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["name"] == DIST == "kvplan-llm"
    assert project["scripts"] == {"kvplan": "kvplan.cli:main"}
    assert "numpy>=1.24" in project["optional-dependencies"]["probe"]
    assert f"dist/{DIST.replace('-', '_')}-*.whl" in (root / ".ci" / "run").read_text()
    workflow = (root / "examples" / "github-actions" / "kvplan-gate.yml").read_text()
    assert "pip install kvplan\n" not in workflow and f'pip install "{DIST} @ git+' in workflow
    assert "entry: kvplan gate --only-deployments" in (root / ".pre-commit-hooks.yaml").read_text()


# --------------------------------------------------------------------------- diff (issue 9, item 24)


def test_diff_compares_resolved_values(repo: Path) -> None:
    # page_size: 64 set against SGLang's default for DSA, which resolves to 64: no change (was "64 -> None")
    (repo / "p64.yaml").write_text((repo / "base.yaml").read_text() + "page_size: 64\n")
    r = run("diff", "p64.yaml", "base.yaml", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["effects"] == [] and d["old_pool_tokens"] == d["new_pool_tokens"] == 1_278_208


def test_diff_engine_change_is_one_row(repo: Path) -> None:
    # the same settings on vLLM: one "engine" row applied to OLD, never engine_version alone on SGLang;
    # NEW is exactly OLD's settings on NEW's engine, so the row's pool is NEW's pool
    text = (repo / "base.yaml").read_text()
    (repo / "vllm.yaml").write_text(text.replace("engine: sglang", "engine: vllm"))
    r = run("diff", "base.yaml", "vllm.yaml", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert [(e["knob"], e["kind"], e["old"], e["new"]) for e in d["effects"]] == [
        ("engine", "engine", "sglang 0.5.23", "vllm 0.33.0")
    ]
    assert d["effects"][0]["pool_tokens"] == d["new_pool_tokens"]
    assert d["effects"][0]["base_pool_tokens"] == d["old_pool_tokens"] == 1_278_208


def test_diff_model_change_is_shown_as_such(repo: Path) -> None:
    r = run("diff", "base.yaml", "indexer39.yaml")
    assert r.exit_code == 0
    assert "model (model change)" in r.stdout and "glm-5.3-39" in r.stdout


def test_diff_engine_change_applies_only_knobs_the_new_engine_reads(repo: Path) -> None:
    # OLD: SGLang with mem_fraction_static 0.85; NEW: vLLM with gpu_memory_utilization 0.9. mem_fraction_static
    # goes with the engine (vLLM does not read it); gpu_memory_utilization is applied to OLD's settings on
    # vLLM, so its row starts from the engine row's pool, shows vLLM's resolved default (not "None"), and ends
    # at NEW's pool (NEW is exactly those settings plus that knob).
    text = (repo / "base.yaml").read_text()
    (repo / "s85.yaml").write_text(text + "mem_fraction_static: 0.85\n")
    (repo / "v90.yaml").write_text(text.replace("engine: sglang", "engine: vllm") + "gpu_memory_utilization: 0.9\n")
    r = run("diff", "s85.yaml", "v90.yaml", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    engine, knob = d["effects"]
    assert (engine["knob"], knob["knob"]) == ("engine", "gpu_memory_utilization")
    assert knob["old"] != "None" and knob["new"] == "0.9"
    assert knob["base_pool_tokens"] == engine["pool_tokens"]
    assert knob["pool_tokens"] == d["new_pool_tokens"]


# --------------------------------------------------------------------------- issue 23, item 5


def test_only_deployments_gates_the_minimal_form_and_locked_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README's minimal deployment is `model:` alone (no engine key); the hook used to skip it, lock entry and all,
    # and pass a 36 % capacity drop. SGLang 0.5.23 (model_runner_kv_cache_mixin.py, profile_max_num_token):
    # available = free_after_weights − pre_load_free × (1 − mem_fraction_static), so lowering the fraction from
    # the default 0.893 (server_args.py reserve heuristic, H200 tp 8) to 0.59 costs pre_load_free × 0.303 =
    # 149,036,204,032 B (H200 CUDA total − 1 GiB) × 0.303 = 45,157,969,821 B whatever the weights; a row on one GPU
    # is 1 KV head (8 / tp 8) × (128 + 128) × 2 B × 64 layers = 32,768 B, so 1,378,112 rows fewer of 3,811,252:
    # -36.16 %.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prod.yaml").write_text("model: qwen3-32b\n")
    assert run("lock", "prod.yaml").exit_code == 0
    (tmp_path / "prod.yaml").write_text("model: qwen3-32b\nmem_fraction_static: 0.59\n")
    r = run("gate", "--only-deployments", "prod.yaml")
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "skipping" not in r.stderr
    assert "pool 3,811,252 -> 2,433,140 tokens (-36.16%)" in r.stdout
    # a locked file is a deployment even when its model key is lost: bad input (exit 2), never a silent skip
    (tmp_path / "prod.yaml").write_text("modle: qwen3-32b\n")
    r = run("gate", "--only-deployments", "prod.yaml")
    assert r.exit_code == 2 and "modle" in r.stderr, r.stderr
    # an unlocked file with a model key is gated too (no entry: exit 2 naming kvplan lock), a workflow is skipped
    (tmp_path / "new.yaml").write_text("model: qwen3-32b\n")
    (tmp_path / "ci.yml").write_text("name: ci\non: [push]\njobs: {}\n")
    r = run("gate", "--only-deployments", "ci.yml", "new.yaml")
    assert r.exit_code == 2 and "kvplan lock new.yaml" in r.stderr, r.stderr
    assert "skipping ci.yml" in r.stderr

"""A deployment preset written for one model, planned with another (issue 23 item 3): the preset's model knobs
(kv dtype, page size, context, backend, MTP, measured memory) take the engine's defaults for the model planned,
unless the user sets them; what the preset carries over (engine, GPU, layout) is said in the first lines and JSON.

Llama-3.1-70B (kvplan/configs/models/llama-3.1-70b.yaml, its HF config.json): 80 layers, 8 kv heads, head_dim 128,
bf16. A GQA token takes K and V: kv heads per rank × 128 × 2 × dtype bytes per layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})

REPRO = ["admit", "--ctx", "128K", "--model", "llama-3.1-70b", "--set", "engine=vllm", "--set", "gpu=h100"]
REPRO += ["--set", "tp=4"]


def _plan(args: list[str]) -> dict[str, Any]:
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    plan: dict[str, Any] = json.loads(r.stdout)["plan"]
    return plan


def _origin(plan: dict[str, Any], name: str) -> str:
    return str(next(k["origin"] for k in plan["knobs"] if k["name"] == name))


def test_issue_23_repro_plans_llama_with_vllm_defaults_not_the_glm_presets_fp8() -> None:
    # vLLM 0.33 for Llama on H100, tp 4: kv_cache_dtype "auto" = the model dtype, bf16 (config/cache.py CacheDType);
    # block size CacheConfig.DEFAULT_BLOCK_SIZE = 16 (config/cache.py:185; FLASH_ATTN takes it). Per token:
    # 80 layers × 8 kv heads / tp 4 × 2 (K, V) × 128 × 2 B = 81,920 B (the preset's fp8 gave half, 40,960 B).
    plan = _plan(REPRO)
    assert plan["cell"]["total_bytes"] == 80 * (8 // 4) * 2 * 128 * 2 == 81_920
    assert plan["page_tokens"] == 16
    assert _origin(plan, "kv_cache_dtype").startswith("default")
    assert _origin(plan, "page_size").startswith("default")
    # num_blocks = available // bytes_per_block (gpu_worker.determine_available_memory, then
    # kv_cache_utils.get_num_blocks); the pool is num_blocks × 16 tokens. The available memory does not depend on
    # the KV dtype, so the same bytes hold half the tokens of the fp8 plan: 449,136 (issue 23), not 898,240.
    num_blocks = plan["available_bytes"] // (16 * 81_920)
    assert plan["rows_per_gpu"] == num_blocks * 16 == 449_136
    carry = plan["written_for_another_model"]
    assert carry["written_for"] == "glm-5.3" and carry["model"] == "llama-3.1-70b"
    assert carry["not_applied"] == {"kv_cache_dtype": "fp8_e4m3", "page_size": 64}  # raw integers in JSON
    assert carry["carried_over"] == {"gpus_per_node": 8, "nodes": 1, "dcp": 1}  # engine, gpu, tp were --set


def test_what_the_preset_carries_over_is_said_in_the_first_lines() -> None:
    r = runner.invoke(app, REPRO)
    assert r.exit_code == 0, r.output
    head = " ".join(" ".join(r.stdout.splitlines()[:3]).split())  # the lines as one, wrapping undone
    assert "preset glm-5.3-8xh200-sglang was written for glm-5.3" in head
    assert "kv_cache_dtype=fp8_e4m3, page_size=64 are not applied to llama-3.1-70b" in head
    assert "carried over: gpus_per_node=8, nodes=1, dcp=1" in head
    knobs = r.stdout[r.stdout.index("\nKnobs") :]
    assert "kv_cache_dtype  " in knobs and "fp8" not in knobs
    assert "set by glm-5.3-8xh200-sglang, written for glm-5.3" in knobs  # dcp 1 is the preset's, not the user's


def test_a_knob_the_user_sets_is_kept_and_labelled_set() -> None:
    # --set kv_cache_dtype=fp8 is the user's: fp8 K/V, 80 × 8 / 4 × 2 × 128 × 1 B = 40,960 B per token
    plan = _plan([*REPRO, "--set", "kv_cache_dtype=fp8"])
    assert plan["cell"]["total_bytes"] == 40_960
    assert _origin(plan, "kv_cache_dtype") == "set"
    assert plan["written_for_another_model"]["not_applied"] == {"page_size": 64}


def test_set_model_follows_the_same_rule_as_the_model_option() -> None:
    # --set model=... replaces the preset's model too: SGLang 0.5.23 on H200, tp 8, kv_cache_dtype auto = bf16
    # (ModelConfig dtype), page_size 1 (ServerArgs default for a non-DSA model): 80 × 8 / 8 × 2 × 128 × 2 B
    plan = _plan(["admit", "--ctx", "128K", "--set", "model=llama-3.1-70b"])
    assert plan["cell"]["total_bytes"] == 80 * 1 * 2 * 128 * 2 == 40_960
    assert plan["page_tokens"] == 1
    assert plan["written_for_another_model"]["not_applied"] == {"kv_cache_dtype": "fp8_e4m3", "page_size": 64}


def test_a_users_own_file_applies_whole_and_says_so(tmp_path: Path) -> None:
    # the user's file (a copy of the preset) is the user's setting: its fp8 applies to Llama, said in the first
    # lines. SGLang on H200, tp 8: 80 × 8 / 8 × 2 × 128 × 1 B = 20,480 B per token.
    mine = tmp_path / "mine.yaml"
    text = (Path(__file__).parents[2] / "kvplan/configs/deployments/glm-5.3-8xh200-sglang.yaml").read_text()
    mine.write_text(text.replace("name: glm-5.3-8xh200-sglang", "name: mine"))
    args = ["admit", "--ctx", "128K", "--model", "llama-3.1-70b", "--deploy", str(mine)]
    plan = _plan(args)
    assert plan["cell"]["total_bytes"] == 20_480
    assert plan["written_for_another_model"]["not_applied"] == {}
    assert plan["written_for_another_model"]["carried_over"] == {"kv_cache_dtype": "fp8_e4m3", "page_size": 64}
    r = runner.invoke(app, args)
    head = " ".join(" ".join(r.stdout.splitlines()[:3]).split())  # the lines as one, wrapping undone
    assert "mine was written for glm-5.3: its kv_cache_dtype=fp8_e4m3, page_size=64 apply to llama-3.1-70b" in head


def test_the_presets_own_model_gets_no_note() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K"])
    assert r.exit_code == 0, r.output
    assert "written for" not in r.stdout
    assert _plan(["admit", "--ctx", "128K"])["written_for_another_model"] is None


def test_the_presets_model_given_as_a_config_folder_keeps_its_fp8(tmp_path: Path) -> None:
    # GLM-5.3's own config.json (the preset's config section) in a folder named otherwise: the same architecture
    # and layers, so the preset was written for it and its fp8_e4m3 applies: 78 layers × 656 B fp8_ds_mla
    import yaml

    folder = tmp_path / "snapshot"
    folder.mkdir()
    preset = yaml.safe_load((Path(__file__).parents[2] / "kvplan/configs/models/glm-5.3.yaml").read_text())
    (folder / "config.json").write_text(json.dumps(preset["config"]))
    plan = _plan(["budget", "--model", str(folder)])
    assert plan["cell"]["main_bytes"] == 78 * 656
    assert plan["written_for_another_model"] is None


def test_the_presets_own_model_keeps_its_fp8() -> None:
    # GLM-5.3 on its own preset: fp8_e4m3 on SGLang's flashmla_kv = fp8_ds_mla, 656 B per layer (DESIGN §2.2)
    plan = _plan(["admit", "--ctx", "128K", "--model", "glm-5.3"])
    assert plan["mla_bytes_per_layer"] == 656
    assert _origin(plan, "kv_cache_dtype") == "set"


def test_simulate_says_what_the_preset_carries_over(tmp_path: Path) -> None:
    # simulate plans the pool from the same deployment: the same line under its title, and in its JSON
    trace = tmp_path / "t.jsonl"
    rows = [{"timestamp": i, "input_length": 2048, "output_length": 1, "hash_ids": [0, 1, 2, 3 + i]} for i in range(4)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["simulate", str(trace), "--semantics", "sglang", "--model", "llama-3.1-70b"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    head = " ".join(" ".join(r.stdout.splitlines()[:3]).split())
    assert "kv_cache_dtype=fp8_e4m3, page_size=64 are not applied to llama-3.1-70b" in head
    r = runner.invoke(app, [*args, "-f", "json"])
    assert json.loads(r.stdout)["written_for_another_model"]["not_applied"]["page_size"] == 64


def test_doctor_checks_a_kimi_log_with_vllms_defaults_not_the_glm_presets_fp8() -> None:
    # shared/logs/vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log: vLLM, Kimi-K2 at TP8, kv_cache_dtype
    # auto (bf16): 61 layers × (512 + 64) × 2 B = 70,272 B a token; "Available KV cache memory: 46.80 GiB" ->
    # 11,173 blocks of 64 = 715,072 tokens, as the log's "GPU KV cache size: 715,072 tokens". The preset's
    # fp8_e4m3 (576 B a layer) made doctor blame "bf16 rows (1152 B/layer) instead of fp8": the rows now match.
    import pytest

    # shared/logs beside the checkout, as tests/runbook/conftest.py finds it (a worktree also looks one level up)
    root = Path(__file__).parents[2]
    name = "vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log"
    log = next((p for p in (root.parent / "shared" / "logs" / name, root.parents[1] / "shared" / "logs" / name)
                if p.is_file()), None)  # fmt: skip
    if log is None:
        pytest.skip("shared/logs is not here")
    r = runner.invoke(app, ["doctor", "--log", str(log), "--model", "kimi-k2", "--set", "engine=vllm"])
    head = " ".join(" ".join(r.stdout.splitlines()[:4]).split())
    assert "kv_cache_dtype=fp8_e4m3, page_size=64 are not applied to kimi-k2" in head
    assert "instead of fp8" not in r.stdout
    assert "the log has 715,072 tokens" in head and "rows give 715,008 – 715,168 tokens" in head

"""``kvplan admit --ctx 128K --model qwen3-next-80b-a3b`` on both default deployments (issue 13's done-when), with
the per-pool figures derived from the engines' formulas (kvplan/engines/sglang_hybrid.py, vllm_hybrid.py docstrings)
and the weights of kvplan/models/params_qwen3_next.py (tests/models/test_params_qwen3_next.py derives them):
20,059,645,504 B a GPU at TP8 without the MTP layer.

Both deployments are H200 × 8, TP8, with the fp8 KV cache (fp8_e4m3) and SGLang page 64 the GLM-5.3 presets set,
given here with --set (PRESET_KNOBS: since issue 23 a preset's model knobs do not follow --model); the 2 kv heads
are replicated over 8 ranks (1 a rank), so a full-attention layer holds 1 × (256 + 256) × 1 B = 512 B a token;
12 full layers.
The Gated DeltaNet state of one request on one rank, per layer: conv 3 × (8,192 / 8) elements, recurrent
(32 / 8) × 128 × 128; SGLang bf16 conv + fp32 recurrent: 6,144 + 262,144 = 268,288 B; vLLM bf16 both:
6,144 + 131,072 = 137,216 B.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from tests.cli.admit_json import check_named

runner = CliRunner(env={"KVPLAN_FORMAT": None})
GiB, MiB = 1 << 30, 1 << 20
W = 20_059_645_504
MODEL = "qwen3-next-80b-a3b"


PRESET_KNOBS = {
    "glm-5.3-8xh200-sglang": ("--set", "kv_cache_dtype=fp8_e4m3", "--set", "page_size=64"),
    "glm-5.3-8xh200-vllm": ("--set", "kv_cache_dtype=fp8"),
}
"""What each GLM-5.3 preset sets for GLM-5.3 and the goldens below assume, set for Qwen3-Next."""


def _admit(*args: str, code: int) -> dict[str, Any]:
    knobs = PRESET_KNOBS["glm-5.3-8xh200-vllm" if "glm-5.3-8xh200-vllm" in args else "glm-5.3-8xh200-sglang"]
    r = runner.invoke(app, ["admit", "--model", MODEL, *args, *knobs, "--format", "json"])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, (r.exit_code, r.stdout[-800:], r.stderr)
    assert r.stderr == ""
    data = json.loads(r.stdout)
    assert isinstance(data, dict)
    return data


_check = check_named


@pytest.mark.parametrize("deploy", ["glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"])
def test_admit_128k_is_a_verdict_on_both_engines(deploy: str) -> None:
    # a verdict, never exit 2 asking for weights_per_gpu
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", MODEL, "-d", deploy])
    assert r.exit_code == 0, (r.stdout[-800:], r.stderr)
    assert "weights per GPU" in r.stdout and "81,324,862,720 parameters" in r.stdout
    if deploy.endswith("vllm"):
        # the vLLM preset's max_model_len 524,288 is GLM-5.3's: not applied to Qwen3-Next (issue 23 item 3), so
        # vLLM takes the config's max_position_embeddings 262,144 and starts (it refused 524,288 before: exit 1)
        head = " ".join(" ".join(r.stdout.splitlines()[:5]).split())  # the headline may carry the weights band
        assert "context_length=524,288" in head and "are not applied to qwen3-next-80b-a3b" in head
        assert "greater than the derived max_model_len" not in r.stdout


def _sglang_pool() -> tuple[int, int, int]:
    """(max_mamba_cache_size K, available bytes, full-pool rows) on the SGLang preset with pre_load_free 143,771 MiB.

    mem_fraction_static 0.893 (tests/engines/test_sglang_hybrid.py: reserved 15,312 MiB at TP8 on an H200);
    rest = (PRE − W) / GiB − PRE / GiB × (1 − 0.893); per_req = 36 × 268,288 = 9,658,368 B;
    K = int((rest × 0.9 / 1.9 × 2^30 − per_req) // per_req); rest −= (K + 1) × per_req / 2^30;
    rows = int(rest × 2^30) // 6,144 // 64 × 64 (cell 12 × 512 B)."""
    pre = 143_771 * MiB
    rest = (pre - W) / GiB - pre / GiB * (1 - 0.893)
    per_req = 36 * (3 * 1024 * 2 + 4 * 128 * 128 * 4)
    k = int((rest * 0.9 / 1.9 * GiB - per_req) // per_req)
    rest -= (k + 1) * per_req / GiB
    available = int(rest * GiB)
    return k, available, available // (12 * 512) // 64 * 64


def test_sglang_pools_golden_128k_bound_by_token_pages() -> None:
    k, available, rows = _sglang_pool()
    assert (k, rows) == (5_617, 9_815_040)
    data = _admit("--ctx", "128K", "--set", "pre_load_free=143771MiB", code=0)
    assert data["plan"]["available_bytes"] == available
    assert data["plan"]["logged_tokens"] == rows  # max_total_num_tokens
    assert data["plan"]["extras"]["max_mamba_cache_size"] == k
    # a 131,072-token request: 131,072 / 64 = 2,048 pages of the 153,360; 5 Mamba slots (extra_buffer) of 5,617
    full, state = _check(data, "pool: full attention (12 layers)"), _check(data, "pool: mamba state (36 layers)")
    assert (full["need"], full["have"]) == (2_048, rows // 64)
    assert (state["need"], state["have"]) == (5, k)
    # at once: min(153,360 // 2,048 = 74 by token pages, 5,617 // 5 = 1,123 by state slots) = 74: token pages bind
    assert data["max_concurrent"] == min(rows // 64 // 2_048, k // 5) == 74


def test_sglang_4k_bound_by_state_slots() -> None:
    k, _, rows = _sglang_pool()
    data = _admit("--ctx", "4K", "--set", "pre_load_free=143771MiB", code=0)
    # 4,096 tokens = 64 pages: 153,360 // 64 = 2,396 by pages, but 5,617 // 5 = 1,123 requests by the state slots
    # (max_running_requests is capped to 1,123 by the mamba state cache too)
    assert rows // 64 // 64 == 2_396 > k // 5 == 1_123
    assert data["max_concurrent"] == 1_123
    assert _check(data, "running requests")["have"] == 1_123


def test_sglang_workspace_does_not_count_the_mamba_pool() -> None:
    # regression: the Mamba state pool ((K + 1) × 9,658,368 B = 54,260,711,424 B) comes out of rest_memory before
    # the token pool; it was counted as "pool padding" against the slack and rejected 128K (52.40 GiB / 14.85 GiB)
    k, available, rows = _sglang_pool()
    data = _admit("--ctx", "128K", "--set", "pre_load_free=143771MiB", code=0)
    ws = _check(data, "workspace")
    # req_to_token (1,123 + 1) × (262,144 + 4) × 4 B + CUDA graphs 512 × 2 MiB + 58 × 8 MiB + the token pool's
    # padding page: (rows + 64) × 6,144 − available
    padding = (rows + 64) * 12 * 512 - available
    assert ws["need"] == 1_124 * 262_148 * 4 + (512 * 2 + 58 * 8) * MiB + padding
    assert ws["ok"] and ws["need"] < 3 * GiB
    assert data["plan"]["extras"]["mamba_alloc_bytes"] == (k + 1) * 36 * 268_288 == 54_260_711_424


def test_vllm_pool_golden_with_the_models_context() -> None:
    # max_model_len 262,144 (the model's own): the engine starts
    data = _admit("--ctx", "128K", "-d", "glm-5.3-8xh200-vllm", "--set", "max_model_len=262144", code=0)
    plan = data["plan"]
    chain = {c["label"]: c["bytes"] for c in plan["chain"]}
    assert chain["weights per GPU"] == W
    # available = requested − weights − torch peak − non-torch − CUDA graphs (vLLM's chain; the weights are ours)
    available = (
        chain["requested"] - W - chain["torch peak (profiling run)"] - chain["non-torch growth"]
        - chain["CUDA-graph estimate"]
    )  # fmt: skip
    assert plan["available_bytes"] == available
    # block: 64 × cdiv(137,216, 64 × 512) = 64 × 5 = 320 tokens (the Mamba state fits one attention page, GDN
    # checkpoint alignment 64); page 320 × 512 = 163,840 B; groups of 12 layers (36 ≥ 1.5 × 12): 1 full + 3 GDN;
    # bytes per block 12 × 163,840 = 1,966,080
    block = 64 * math.ceil(137_216 / (64 * 512))
    assert (plan["page_tokens"], plan["extras"]["bytes_per_block"]) == (block, 12 * block * 512) == (320, 1_966_080)
    num_blocks = available // (12 * block * 512)
    assert plan["extras"]["num_blocks"] == num_blocks == 56_462
    # a 131,072-token request: cdiv(131,072, 320) = 410 full-attention blocks + 3 GDN groups × 3 ('align') = 419
    pool = _check(data, "pool: vLLM block pool")
    assert (pool["need"], pool["have"]) == (410 + 9, num_blocks - 1)
    assert data["max_concurrent"] == (num_blocks - 1) // 419 == 134
    # "GPU KV cache size": int(num_blocks / blocks for 262,144 tokens (820 + 9) × 262,144) = 17,854,251 tokens
    assert plan["logged_tokens"] == int(num_blocks / 829 * 262_144) == 17_854_251

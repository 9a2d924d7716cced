"""``kvplan admit --ctx 128K --model qwen3.6-27b`` (Qwen3.5-family dense GDN hybrid, tests/data/hf/qwen3.6-27b) on
both default deployments, the pools derived from the engines' formulas as tests/cli/test_hybrid_presets_qwen3_next.py
derives Qwen3-Next's (the same chains: kvplan/engines/sglang_hybrid.py, vllm_hybrid.py docstrings).

H200 × 8, TP8, fp8 KV (fp8_e4m3), SGLang page 64, set with --set as for Qwen3-Next. Weights a GPU
(tests/models/test_qwen3_5_family.py derives the groups): 2 B × (26,727,551,488 / 8 split + kv_proj 167,772,160 / 4
[4 kv heads replicated over 8 ranks: 1 a rank] + norms 674,816) + rotary cache 262,144 × 64 × 2 B = 6,800,678,016 B.
A full layer holds 1 kv head × (256 + 256) × 1 B = 512 B a token and rank; 16 full layers.
Gated DeltaNet state of one request on one rank, per layer: conv 3 × (10,240 / 8) × 2 B = 7,680 B; recurrent
(48 / 8) × 128 × 128 × 4 B = 393,216 B (float32 on both engines: SGLang reads ``mamba_ssm_dtype``; vLLM
``Qwen3_5ForConditionalGenerationConfig`` copies it into ``mamba_ssm_cache_dtype``): 400,896 B; × 48 layers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvplan.cli import app
from tests.cli.admit_json import check_named

runner = CliRunner(env={"KVPLAN_FORMAT": None})
GiB, MiB = 1 << 30, 1 << 20
W = 6_800_678_016
STATE = 3 * 1280 * 2 + 6 * 128 * 128 * 4  # 400,896 B a GDN layer, request and rank
MODEL = str(Path(__file__).resolve().parents[1] / "data" / "hf" / "qwen3.6-27b" / "config.json")
SGLANG = ("--set", "kv_cache_dtype=fp8_e4m3", "--set", "page_size=64", "--set", "pre_load_free=143771MiB")
VLLM = ("-d", "glm-5.3-8xh200-vllm", "--set", "kv_cache_dtype=fp8", "--set", "max_model_len=262144")


def _admit(*args: str) -> dict[str, Any]:
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", MODEL, *args, "--format", "json"])
    assert r.exit_code == 0, (r.exit_code, r.stdout[-800:], r.stderr)
    data = json.loads(r.stdout)
    assert isinstance(data, dict)
    return data


_check = check_named


def test_sglang_pools_with_the_vlm_mem_fraction() -> None:
    # mem_fraction_static: 0.893 (15,312 MiB reserved at TP8 on an H200, as Qwen3-Next's) × SGLang 0.5.23
    # memory_hook.adjust_mem_fraction_for_vlm: vision_config has no num_hidden_layers (it writes depth 27): 24;
    # hidden 1,152: ratio 24 × 1,152² / (24 × 1,024²) = 1.265625; × 0.95 × (1 − 0.1 × 0.265625) = × 0.9247656
    mfs = 0.893 * 0.95 * (1 - 0.1 * (1152**2 / 1024**2 - 1))
    pre = 143_771 * MiB
    rest = (pre - W) / GiB - pre / GiB * (1 - mfs)
    per_req = 48 * STATE  # 19,243,008 B
    # max_mamba_cache_size = int((rest × 0.9 / 1.9 × 2^30 − per_req) // per_req) (mamba_full_memory_ratio 0.9)
    k = int((rest * 0.9 / 1.9 * GiB - per_req) // per_req)
    rest -= (k + 1) * per_req / GiB
    available = int(rest * GiB)
    rows = available // (16 * 512) // 64 * 64
    assert (k, rows) == (2_896, 7_561_984)  # without the VLM factor (0.893): 3,145 slots, 8,213,440 rows
    data = _admit(*SGLANG)
    assert data["plan"]["available_bytes"] == available
    assert data["plan"]["logged_tokens"] == rows  # max_total_num_tokens
    assert data["plan"]["extras"]["max_mamba_cache_size"] == k
    # 131,072 tokens = 2,048 pages of the 118,156; 5 state slots (extra_buffer: SGLang lists
    # Qwen3_5ForConditionalGeneration in _MAMBA_EXTRA_BUFFER_ARCHS) of 2,896
    full, state = _check(data, "pool: full attention (16 layers)"), _check(data, "pool: mamba state (48 layers)")
    assert (full["need"], full["have"]) == (2_048, rows // 64)
    assert (state["need"], state["have"]) == (5, k)
    assert data["max_concurrent"] == min(rows // 64 // 2_048, k // 5) == 57


def test_vllm_pool_golden() -> None:
    data = _admit(*VLLM)
    plan = data["plan"]
    chain = {c["label"]: c["bytes"] for c in plan["chain"]}
    assert chain["weights per GPU"] == W
    available = (
        chain["requested"] - W - chain["torch peak (profiling run)"] - chain["non-torch growth"]
        - chain["CUDA-graph estimate"]
    )  # fmt: skip
    assert plan["available_bytes"] == available
    # block: 64 × cdiv(400,896, 64 × 512) = 64 × 13 = 832 tokens (GDN checkpoint alignment 64); page 832 × 512 =
    # 425,984 B; groups of 16 layers (48 GDN = 3 × 16): 1 full + 3 GDN; bytes per block 16 × 425,984 = 6,815,744
    # (with the bf16 recurrent state vLLM does not use for Qwen3.5: 204,288 B, block 448, 3,670,016 B a block)
    block = 64 * math.ceil(STATE / (64 * 512))
    assert (plan["page_tokens"], plan["extras"]["bytes_per_block"]) == (block, 16 * block * 512) == (832, 6_815_744)
    num_blocks = available // (16 * block * 512)
    assert plan["extras"]["num_blocks"] == num_blocks
    # a 131,072-token request: cdiv(131,072, 832) = 158 full-attention blocks + 3 GDN groups × 3 ('align') = 167
    pool = _check(data, "pool: vLLM block pool")
    assert (pool["need"], pool["have"]) == (158 + 9, num_blocks - 1)
    assert data["max_concurrent"] == (num_blocks - 1) // 167
    # "GPU KV cache size": int(num_blocks / (cdiv(262,144, 832) = 316 + 9) × 262,144)
    assert plan["logged_tokens"] == int(num_blocks / 325 * 262_144)

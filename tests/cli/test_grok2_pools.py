"""``kvplan admit --model grok-2`` on both engines' default deployment (H200 × 8, TP8, bf16 KV): the pools derived
from the engines' formulas (kvplan/engines/sglang.py and vllm.py docstrings; tests/models/test_grok2.py derives the
shapes and the parameter count).

A token holds K and V of one kv head a rank on each of the 64 layers: 64 × max(1, 8 // 8) × 128 × 2 × 2 B = 32,768 B.
Weights a GPU (TP8, bf16): attention 8,589,934,592 + k/v 1,073,741,824 (8 kv heads: 8 ways) + experts
206,158,430,208 (FusedMoE: every expert split 8 ways) + residual MLP 51,539,607,552 + embed and lm_head
2,147,483,648 (vocab parallel) = 269,509,197,824 params / 8 × 2 B = 67,377,299,456 B; + the replicated router and
norms (4,194,304 + 2,105,344) × 2 B = 12,599,296; + the rotary cos/sin cache 131,072 × 128 × 2 B = 33,554,432
(get_rope: max_position × rotary_dim) = 67,423,453,184 B.
"""

from __future__ import annotations

from typing import Any

from tests.cli.admit_json import admit_json, check_named

GiB, MiB = 1 << 30, 1 << 20
CELL = 64 * 1 * 128 * 2 * 2  # 32,768 B a token and rank
W = 269_509_197_824 // 8 * 2 + (4_194_304 + 2_105_344) * 2 + 131_072 * 128 * 2


def _admit(ctx: str, *args: str, code: int = 0) -> dict[str, Any]:
    return admit_json("grok-2", ctx, *args, code=code)


_check = check_named


def test_sglang_pool_golden() -> None:
    # mem_fraction_static (SGLang 0.5.23 memory_hook reserve heuristic, non-MLA on Hopper, fa3, page 1):
    # reserved = 512 + max(8,192, 2,048) × 1.5 + tp 8 × pp 1 / 8 × 1,024 + decode graphs 512 × 2 + prefill graph
    # 58 capture sizes × 8 = 15,312 MiB; round((143,771 − 15,312) / 143,771, 3) = 0.893
    mfs = round((143_771 - 15_312) / 143_771, 3)
    assert mfs == 0.893
    pre = 143_771 * MiB
    assert W == 67_423_453_184
    # model_runner.profile_max_num_token: rest = free after weights − total × (1 − mfs), in GiB; rows = rest // cell
    available = int(((pre - W) / GiB - pre / GiB * (1 - mfs)) * GiB)
    rows = available // CELL
    assert rows == 2_050_799
    data = _admit("128K", "--set", "pre_load_free=143771MiB")
    plan = data["plan"]
    assert plan["cell"]["main_bytes"] == CELL and plan["page_tokens"] == 1
    assert {k["name"]: k["value"] for k in plan["knobs"]}["mem_fraction_static"] == mfs
    chain = {c["label"]: c["bytes"] for c in plan["chain"]}
    assert chain["weights per GPU"] == W
    assert plan["available_bytes"] == available
    assert plan["logged_tokens"] == rows  # max_total_num_tokens
    assert plan["context_len"] == 131_072  # max_position_embeddings


def test_vllm_pool_golden() -> None:
    data = _admit("128K", "--set", "engine=vllm")
    plan = data["plan"]
    chain = {c["label"]: c["bytes"] for c in plan["chain"]}
    assert chain["weights per GPU"] == W
    available = (
        chain["requested"] - chain["weights per GPU"] - chain["torch peak (profiling run)"]
        - chain["non-torch growth"] - chain["CUDA-graph estimate"]
    )  # fmt: skip
    assert plan["available_bytes"] == available
    # one FullAttentionSpec group of 64 layers, block 16: 16 × 32,768 = 524,288 B a block
    assert (plan["page_tokens"], plan["extras"]["bytes_per_block"]) == (16, 16 * CELL)
    num_blocks = available // (16 * CELL)
    assert plan["extras"]["num_blocks"] == num_blocks
    # 131,072 tokens = 8,192 blocks; block 0 is the null block
    pool = _check(data, "pool pages")
    assert (pool["need"], pool["have"]) == (8_192, num_blocks - 1)
    assert data["max_concurrent"] == (num_blocks - 1) // 8_192


def test_a_context_past_131072_positions_is_rejected_on_both_engines() -> None:
    # SGLang context_len and vLLM max_model_len both default to max_position_embeddings 131,072
    for engine in ("sglang", "vllm"):
        data = _admit("256K", "--set", f"engine={engine}", code=1)
        check = _check(data, "context length")
        assert (check["need"], check["have"]) == (262_144, 131_072)


def test_vllm_online_fp8_weights_on_h100() -> None:
    # bf16 Grok-2 at TP8 is 62.79 GiB a GPU, too much for an 80 GB H100 to keep a 131,072-token request; with
    # --quantization fp8 vLLM quantizes every linear layer at load (fp8.py Fp8OnlineLinearMethod, FusedMoE
    # Fp8MoEMethod) to one byte a weight; grok1.py's gate is ReplicatedLinear(quant_config=None), and the
    # embeddings, lm_head and norms keep bf16: (8,589,934,592 + 1,073,741,824 + 206,158,430,208 + 51,539,607,552)
    # / 8 × 1 B + 2,147,483,648 / 8 × 2 B + (4,194,304 + 2,105,344) × 2 B + the rotary cache 33,554,432 B
    fp8 = 267_361_714_176 // 8 + 2_147_483_648 // 8 * 2 + (4_194_304 + 2_105_344) * 2 + 131_072 * 128 * 2
    assert fp8 == 34_003_238_912
    data = _admit("128K", "--set", "engine=vllm", "--set", "gpu=h100", "--set", "quantization=fp8")
    chain = {c["label"]: c["bytes"] for c in data["plan"]["chain"]}
    assert chain["weights per GPU"] == fp8
    assert data["plan"]["cell"]["main_bytes"] == CELL  # kv_cache_dtype auto: still the model's bf16

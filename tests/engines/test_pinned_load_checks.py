"""kvplan/engines/load_checks.py pinned (mutation check seed 28353: 10 survivors of 30): each engine's own words for
an expert width that does not split, and the DP-attention layout named in the refusal.

- SGLang ``srt/layers/moe/fused_moe_triton/layer.py FusedMoE.__init__``: ``assert intermediate_size %
  self.moe_tp_size == 0``; vLLM ``model_executor/layers/fused_moe/config.py``: ``assert self.intermediate_size %
  tp_size == 0``.
- Qwen/Qwen3-235B-A22B-FP8 (tests/data/hf): moe_intermediate_size 1536, 64 heads, 4 kv heads; written here with
  1,540 (1,540 % 8 = 4), so at tp 8 the experts' width does not split on either engine.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
QWEN_FP8 = HF / "qwen3-235b-a22b-fp8" / "config.json"


def _plan(engine: str, model: str, *sets: str) -> PoolPlan:
    dep = load_deployment(f"glm-5.3-8xh200-{engine}", ("context_length=32768", *sets))
    dep = replace(dep, model=model, kv_cache_dtype="auto", page_size=None)
    return plan_pool(load_model(model), dep)


def _width_1540(tmp_path: Path) -> str:
    data = json.loads(QWEN_FP8.read_text())
    data["moe_intermediate_size"] = 1540
    (tmp_path / "config.json").write_text(json.dumps(data))
    return str(tmp_path / "config.json")


def test_each_engine_refuses_an_expert_width_in_its_own_words(tmp_path: Path) -> None:
    model = _width_1540(tmp_path)
    sg = _plan("sglang", model, "tp=8").startup_error
    vl = _plan("vllm", model, "tp=8").startup_error
    assert sg is not None and "assert intermediate_size % self.moe_tp_size == 0 (1540, moe tp 8)" in sg
    assert vl is not None and "assert self.intermediate_size % tp_size == 0 (1540, moe tp 8)" in vl


def test_the_refusal_names_the_dp_attention_layout() -> None:
    # 1536 / 8 = 192 a rank: not a whole number of 128-wide fp8 blocks (test_load_refusals.py), with DP attention 2
    p = _plan("sglang", str(QWEN_FP8), "tp=8", "dp_attention=2")
    assert p.startup_error is not None
    assert p.startup_error.startswith("SGLang 0.5.23 refuses to load the model at tp 8 dp_attention 2: ")
    one = _plan("sglang", str(QWEN_FP8), "tp=8").startup_error  # no DP attention: not named
    assert one is not None and one.startswith("SGLang 0.5.23 refuses to load the model at tp 8: ")


def test_sglang_checks_each_replicated_kv_slice_against_the_fp8_block(tmp_path: Path) -> None:
    # SGLang Fp8LinearMethod.validate_block_quant_shapes checks every slice of the merged qkv_proj against block_n
    # 128 (vLLM skips merged ones: ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch). With head_dim 64
    # and 4 kv heads at tp 8 each rank holds one replicated kv head: a k slice of max(4 // 8, 1) × 64 = 64 values
    data = json.loads(QWEN_FP8.read_text())
    data["head_dim"] = 64
    (tmp_path / "config.json").write_text(json.dumps(data))
    p = _plan("sglang", str(tmp_path / "config.json"), "tp=8")
    assert p.startup_error is not None
    assert "Weight output_partition_size = 64 is not divisible by weight quantization block_n = 128" in p.startup_error


def _mla_32_wide_v(tmp_path: Path) -> str:
    """deepseek-r1's config (fp8 blocks 128 × 128) with 8 heads of nope 96, rope 32, v 32: at tp 8 one head a rank,
    so q_b_proj's slice is 96 + 32 = 128 (whole), kv_b_proj's 96 + 32 = 128 (whole), o_proj's input 1 × 32 (not)."""
    data = json.loads((HF / "deepseek-r1" / "config.json").read_text())
    data.update(num_attention_heads=8, qk_nope_head_dim=96, qk_rope_head_dim=32, v_head_dim=32)
    (tmp_path / "config.json").write_text(json.dumps(data))
    return str(tmp_path / "config.json")


def test_mla_o_proj_refuses_after_whole_q_b_and_kv_b_slices(tmp_path: Path) -> None:
    # DeepseekV2AttentionMLA.__init__ builds q_b_proj, kv_b_proj (ColumnParallelLinear, output num_heads × (nope +
    # rope) and num_heads × (nope + v)), then o_proj (RowParallelLinear, input num_heads × v): both engines' fp8
    # block checks (vLLM validate_fp8_block_shape, SGLang Fp8LinearMethod.validate_block_quant_shapes) pass the two
    # 128-wide slices and raise at o_proj's 32 columns a rank, the first check that fails
    model = _mla_32_wide_v(tmp_path)
    for engine in ("sglang", "vllm"):
        err = _plan(engine, model, "tp=8").startup_error
        assert err is not None
        assert "Weight input_size_per_partition = 32 is not divisible by weight quantization block_k = 128." in err


def test_sglang_skips_the_row_check_for_an_attention_tp_below_tp(tmp_path: Path) -> None:
    # SGLang validate_block_quant_shapes checks a row slice only when input_size // input_size_per_partition ==
    # tp_size (the whole TP, 8): under dp_attention 2 o_proj is split over attention tp 4 (2 heads × 32 = 64 columns
    # a rank, not a whole block), 256 // 64 = 4 != 8, so the model loads; the column slices are skipped alike
    p = _plan("sglang", _mla_32_wide_v(tmp_path), "tp=8", "dp_attention=2")
    assert p.startup_error is None


def test_sglang_checks_the_dense_mlp_under_dp_attention(tmp_path: Path) -> None:
    # SGLang DeepseekV2DecoderLayer: a dense layer's DeepseekV2MLP gets tp_size None (the whole TP group, 8) unless
    # enable_moe_dense_fully_dp() (moe_dense_tp_size == 1, set only by the prefill context-parallel and DWDP modes),
    # DP attention or not; gate_up_proj's slices are 18,496 / 8 = 2,312 rows, not whole 128-row fp8 blocks
    # (Fp8LinearMethod.validate_block_quant_shapes). kvplan skipped the check under DP attention: it said the
    # engine starts (570,075 tokens at dp_attention 2) where SGLang refuses as it does at tp 8 alone
    data = json.loads((HF / "deepseek-r1" / "config.json").read_text())
    data["intermediate_size"] = 18_496
    (tmp_path / "config.json").write_text(json.dumps(data))
    for sets in (("tp=8",), ("tp=8", "dp_attention=2"), ("tp=8", "dp_attention=8")):
        err = _plan("sglang", str(tmp_path / "config.json"), *sets).startup_error
        assert err is not None
        assert "Weight output_partition_size = 2312 is not divisible by weight quantization block_n = 128." in err

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

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.load_checks import load_refusal
from kvplan.models.arch import ModelArch
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


# Fresh seed 19501 (26 of 30): an MLA column checked only once it is split, and block_n (not block_k) against a
# column's output slice. Both engines' validate_fp8_block_shape (vllm/model_executor/layers/quantization/utils/
# fp8_utils.py; sglang/srt/layers/quantization/fp8_utils.py, called from Fp8LinearMethod.create_weights):
# ``block_n, block_k = block_size[0], block_size[1]``; ``is_tp_split = tp_size > 1 and output_size //
# sum(output_partition_sizes) == tp_size``, ``is_merged_gemm = len(output_partition_sizes) > 1``; a column's slices
# are checked against block_n only when split or merged, a row's input against block_k only when tp_size > 1.


def _dep(engine: str, **knobs: object):  # type: ignore[no-untyped-def]
    return replace(load_deployment(f"glm-5.3-8xh200-{engine}"), **knobs)


def _r1_heads(heads: int) -> ModelArch:
    """deepseek-r1 (fp8 blocks 128 × 128, MLA nope 128, rope 64, v 128) with ``heads`` attention heads."""
    arch = load_model("deepseek-r1")
    assert arch.shards is not None
    return replace(arch, shards=replace(arch.shards, num_attention_heads=heads))


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_an_mla_q_b_slice_is_checked_once_split_over_two_ranks(engine: str) -> None:
    # DeepseekV2AttentionMLA.__init__ builds q_b_proj first (ColumnParallelLinear, output heads × (nope + rope)).
    # 2 heads at tp 2: one head a rank, 1 × (128 + 64) = 192 rows, 192 % 128 = 64: refused at tp 2 (is_tp_split)
    r = load_refusal(_r1_heads(2), _dep(engine, tp=2))
    assert r is not None and r.rule == "attention blocks"
    assert r.message == "Weight output_partition_size = 192 is not divisible by weight quantization block_n = 128."
    # 1 head at tp 1: the same 192 rows, not split (tp_size 1) and not merged: not checked. kv_b_proj 1 × 256 and
    # o_proj (tp 1: no row check), the dense MLP (18,432 = 144 blocks) and experts (2,048 = 16 blocks) are whole
    assert load_refusal(_r1_heads(1), _dep(engine, tp=1)) is None


def test_a_column_slice_is_checked_against_block_n_not_block_k() -> None:
    # Qwen3-235B-A22B-FP8 (64 heads, 4 kv heads, experts 1,536) with head_dim 64 and a 64 × 128 [block_n, block_k]
    # at SGLang tp 8: qkv_proj's merged slices q 64 / 8 × 64 = 512, k = v = one replicated head × 64 = 64 rows, each
    # a whole 64-row block_n; o_proj's input 512 = 4 block_k. The first refusal is the experts' down_proj: 1,536 / 8 =
    # 192 inputs, 192 % 128 = 64 (Fp8MoEMethod.create_weights: gate/up 192 % block_n 64 = 0 pass first)
    arch = load_model(str(QWEN_FP8))
    assert arch.shards is not None
    s = arch.shards
    assert s.attention_block == (128, 128) and s.expert_block == (128, 128)
    shards = replace(s, head_dim=64, attention_block=(64, 128), expert_block=(64, 128), dense_block=None)
    r = load_refusal(replace(arch, shards=shards), _dep("sglang", tp=8))
    assert r is not None
    assert r.message == "The input_size of down's weight = 192 is not divisible by weight quantization block_k = 128."
    # the other way round, 128 × 64: the k slice's 64 rows are not a whole 128-row block_n, and the message names
    # block_n (``f"... block_n = {block_n}."``), 128, not block_k's 64
    shards = replace(s, head_dim=64, attention_block=(128, 64), expert_block=(128, 64), dense_block=None)
    r = load_refusal(replace(arch, shards=shards), _dep("sglang", tp=8))
    assert r is not None
    assert r.message == "Weight output_partition_size = 64 is not divisible by weight quantization block_n = 128."


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_row_slice_is_checked_against_block_k(engine: str, tmp_path: Path) -> None:
    # _mla_32_wide_v at tp 8 with a 32 × 128 [block_n, block_k]: q_b_proj's and kv_b_proj's 128-row slices are
    # whole 32-row blocks; o_proj's input, 1 head × v 32 = 32 columns, is not a whole 128-column block_k
    # (validate_fp8_block_shape's row check: tp_size 8 > 1, input_size // 32 == 8). The MLP blocks are dropped so
    # that o_proj is the only check that can fail
    arch = load_model(_mla_32_wide_v(tmp_path))
    assert arch.shards is not None
    shards = replace(arch.shards, attention_block=(32, 128), dense_block=None, expert_block=None)
    r = load_refusal(replace(arch, shards=shards), _dep(engine, tp=8))
    assert r is not None
    assert r.message == "Weight input_size_per_partition = 32 is not divisible by weight quantization block_k = 128."


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_gate_up_are_checked_against_the_experts_block_n(engine: str) -> None:
    # Fp8MoEMethod.create_weights (both engines): ``intermediate_size_per_partition % block_n`` (gate/up's output)
    # first, then ``% block_k`` (down's input) at tp > 1. Qwen3-235B-A22B-FP8's experts at tp 8: 1,536 / 8 = 192 a
    # rank; with a 128 × 64 expert block, 192 % 128 = 64 refuses at gate/up, naming block_n 128 (192 % 64 = 0)
    arch = load_model(str(QWEN_FP8))
    assert arch.shards is not None
    arch = replace(arch, shards=replace(arch.shards, expert_block=(128, 64)))
    r = load_refusal(arch, _dep(engine, tp=8))
    assert r is not None and r.rule == "expert blocks"
    assert r.message == (
        "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."
    )


def test_ep_2_is_named_and_splits_the_experts(tmp_path: Path) -> None:
    # experts 1,540 wide at tp 8 ep 2. SGLang: moe_tp = tp / ep = 4 (get_moe_tensor_parallel_world_size), 1,540 / 4
    # = 385 a rank, 385 % 128 = 1: gate/up not whole blocks. vLLM --enable-expert-parallel (ep > 1): experts whole on
    # every rank (FusedMoEParallelConfig.make: tp 1 in the MoE), 1,540 % 128 = 4. The refusal names ep 2
    model = _width_1540(tmp_path)
    sg = _plan("sglang", model, "tp=8", "ep=2").startup_error
    vl = _plan("vllm", model, "tp=8", "ep=2").startup_error
    assert sg is not None and sg.startswith("SGLang 0.5.23 refuses to load the model at tp 8 ep 2: ")
    assert "gate's and up's weight = 385 is not divisible by weight quantization block_n = 128." in sg
    assert vl is not None and " refuses to load the model at tp 8 ep 2: " in vl
    assert "gate's and up's weight = 1540 is not divisible by weight quantization block_n = 128." in vl


def test_vllm_checks_o_proj_input_of_heads_times_head_dim() -> None:
    # Full attention's o_proj (RowParallelLinear) takes heads / tp × head_dim inputs a rank. Qwen3-235B-A22B-FP8
    # with 8 heads of 64 at vLLM tp 8: 1 × 64 = 64 inputs, 64 % block_k 128 = 64 (validate_fp8_block_shape's row
    # check, input_size 512 // 64 = 8 == tp_size); vLLM skips the merged qkv_proj's slices, so this is the first
    arch = load_model(str(QWEN_FP8))
    assert arch.shards is not None
    arch = replace(arch, shards=replace(arch.shards, num_attention_heads=8, head_dim=64))
    r = load_refusal(arch, _dep("vllm", tp=8))
    assert r is not None and r.rule == "attention blocks"
    assert r.message == "Weight input_size_per_partition = 64 is not divisible by weight quantization block_k = 128."


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_down_proj_block_k_is_checked_from_tp_2(engine: str) -> None:
    # Fp8MoEMethod.create_weights checks down's input against block_k whenever the TP world size is above 1 (both
    # engines). Experts 1,664 wide (128 × 13) in a 64 × 128 block at tp 2: 832 a rank, 832 % 64 = 0 (gate/up whole)
    # but 832 % 128 = 64: refused at tp 2 already; at tp 1 the whole 1,664 is 13 blocks of 128 and loads
    arch = load_model(str(QWEN_FP8))
    assert arch.shards is not None
    odd = replace(arch, shards=replace(arch.shards, expert_intermediate=1664, expert_block=(64, 128)))
    r = load_refusal(odd, _dep(engine, tp=2))
    assert r is not None
    assert r.message == "The input_size of down's weight = 832 is not divisible by weight quantization block_k = 128."
    assert load_refusal(odd, _dep(engine, tp=1)) is None


def test_sglang_refuses_an_ep_above_tp() -> None:
    # Fresh seed 37053's survivor (moe_tp's floor 1 -> 0) showed kvplan planning SGLang at ep 16 over tp 8, which
    # SGLang cannot launch: srt/entrypoints/engine.py starts each TP rank's scheduler with ``moe_ep_rank = tp_rank
    # // (server_args.tp_size // server_args.ep_size)``, and 8 // 16 = 0. Before the fix: "starts". ep 8 = tp
    # launches (8 // 8 = 1); vLLM's EP spans its ranks by --enable-expert-parallel and has no such division
    arch = load_model(str(QWEN_FP8))
    r = load_refusal(arch, _dep("sglang", tp=8, ep=16, nodes=2))
    assert r is not None and r.rule == "experts" and r.experts
    assert r.message == (
        "ZeroDivisionError: integer division or modulo by zero (moe_ep_rank = tp_rank // (tp_size 8 // ep_size 16))"
    )
    assert r.where == "sglang/srt/entrypoints/engine.py, the scheduler launch"
    bf16 = load_model(str(HF / "qwen3-235b-a22b" / "config.json"))  # no fp8 blocks: 128 experts, 16 a rank at ep 8
    assert load_refusal(bf16, _dep("sglang", tp=8, ep=8)) is None
    assert load_refusal(bf16, _dep("vllm", tp=8, ep=16, nodes=2)) is None


# ---- fresh seed 36411 (issue 26): SGLang's experts at ep = tp are whole on every rank


@pytest.mark.parametrize(("tp", "ep"), [(8, 8), (1, 1)])
def test_sglang_experts_at_ep_equal_to_tp_are_not_split(tp: int, ep: int) -> None:
    # SGLang parallel_state get_moe_tensor_parallel_world_size: moe_tp = tp_size // moe_ep_size, 8 // 8 = 1 // 1 = 1,
    # so each rank holds whole experts. Qwen3-235B-A22B-FP8 with experts 1,408 wide (DeepSeek-V2-Lite's and
    # Qwen1.5-MoE-A2.7B's moe_intermediate_size, 11 × 128): Fp8MoEMethod.create_weights checks the per-rank width
    # 1,408 // 1 = 1,408 against block_n 128 (11 blocks) and, at tp 8, against block_k 128: loads. (Qwen3's own
    # 1,536 = 12 × 128 would also pass split in two, 768 = 6 × 128; 1,408 would not, 704 = 5.5 × 128.)
    arch = load_model(str(QWEN_FP8))
    assert arch.shards is not None and arch.shards.expert_block == (128, 128)
    odd = replace(arch, shards=replace(arch.shards, expert_intermediate=1408))
    assert load_refusal(odd, _dep("sglang", tp=tp, ep=ep)) is None
    # the same width split over two MoE-TP ranks (tp 8 ep 4: 8 // 4 = 2): 704 a rank, 704 % 128 = 64 refuses at
    # gate/up, naming the split width
    r = load_refusal(odd, _dep("sglang", tp=8, ep=4))
    assert r is not None and r.rule == "expert blocks"
    assert r.message == (
        "The output_size of gate's and up's weight = 704 is not divisible by weight quantization block_n = 128."
    )

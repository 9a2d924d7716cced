"""The engines' load-time refusals, through the plan, admit and fit (issue 23 item 2).

Every expected message is the engine's own, filled with numbers derived here from the checkpoint's config.json
and the engine's source:
- ``Fp8MoEMethod.create_weights`` (vLLM ``model_executor/layers/quantization/fp8.py``; SGLang
  ``srt/layers/quantization/fp8.py``): ``intermediate_size_per_partition % block_n != 0`` raises "The output_size
  of gate's and up's weight = {n} is not divisible by weight quantization block_n = {block_n}."; the per-rank
  width is moe_intermediate_size / moe_tp, moe_tp = tp / ep in SGLang, tp in vLLM (1 with
  --enable-expert-parallel, kvplan's ep > 1);
- SGLang ``Fp8LinearMethod.validate_block_quant_shapes`` checks every slice of a merged projection (gate_up) against
  block_n; vLLM skips merged ones (``ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch``) and refuses at
  the row-parallel down_proj (``validate_fp8_block_shape``: "Weight input_size_per_partition = {n} is not
  divisible by weight quantization block_k = {block_k}.");
- vLLM ``ModelConfig.verify_with_parallel_config``: "Total number of attention heads ({h}) must be divisible by
  tensor parallel size ({tp})."; ``QKVParallelLinear.__init__``: kv heads split (kv >= tp: ``divide(kv, tp)``) or
  replicated (``divide(tp, kv)``), ``ensure_divisibility`` asserting "{num} is not divisible by {den}".

Public corroboration: Qwen3-235B FP8 at TP8 on SGLang, "ValueError: The output_size of gate's and up's weight =
192 is not divisible by weight quantization block_n = 128." (1536 / 8 = 192; fixed with TP4: 384 = 3 × 128);
DeepSeek-R1 at TP32, "Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128"
(sgl-project/sglang#3491); vLLM "Total number of attention heads (28) must be divisible by tensor parallel size
(8)" for Qwen2.5-7B at TP8.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.models.deploy import Requirements
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.admit import Request, admit
from kvplan.plan.fit import FitQuery, fit
from kvplan.render.fit_report import deploy_yaml

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
QWEN_FP8 = str(HF / "qwen3-235b-a22b-fp8" / "config.json")
"""Qwen/Qwen3-235B-A22B-FP8: weight_block_size [128, 128], moe_intermediate_size 1536, 128 experts, 94 layers,
64 heads, 4 kv heads, modules_to_not_convert = the norms and the routers (``mlp.gate``) only."""
MOE_192 = "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."
ENGINE = {"sglang": "SGLang 0.5.23", "vllm": "vLLM 0.33.0"}


def _plan(engine: str, model: str, **sets: object):  # type: ignore[no-untyped-def]
    base = {"context_length": 32768, **sets}
    dep = load_deployment(f"glm-5.3-8xh200-{engine}", [f"{k}={v}" for k, v in base.items()])
    dep = replace(dep, model=model, kv_cache_dtype="auto", page_size=None)
    return plan_pool(load_model(model), dep)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_qwen3_235b_fp8_tp8_is_refused_at_load(engine: str) -> None:
    # 1536 / 8 = 192 = 1.5 × 128: the experts' gate/up slice is not a whole number of fp8 blocks
    p = _plan(engine, QWEN_FP8, tp=8)
    where = {"sglang": "sglang/srt", "vllm": "vllm/model_executor"}[engine]
    assert p.startup_error == (
        f"{ENGINE[engine]} refuses to load the model at tp 8: {MOE_192} "
        f"({where}/layers/quantization/fp8.py Fp8MoEMethod.create_weights)"
    )
    a = admit(p, Request(ctx_tokens=32768))
    assert not a.admitted
    (starts,) = (c for c in a.checks if c.name == "engine starts")
    assert not starts.ok and MOE_192 in starts.detail


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("sets", [{"tp": 8, "ep": 8}, {"tp": 4}])
def test_qwen3_235b_fp8_whole_blocks_start(engine: str, sets: dict[str, int]) -> None:
    # ep 8: SGLang moe_tp = 8 / 8 = 1, vLLM --enable-expert-parallel: each expert whole, 1536 = 12 × 128;
    # tp 4: 1536 / 4 = 384 = 3 × 128
    p = _plan(engine, QWEN_FP8, **sets)
    assert p.startup_error is None
    assert admit(p, Request(ctx_tokens=32768)).admitted


def test_bf16_qwen3_235b_at_tp8_still_starts() -> None:
    # the bf16 checkpoint has no blocks; 4 kv heads at tp 8: replicated (tp % kv == 0), as both engines allow
    assert _plan("sglang", "qwen3-235b-a22b", tp=8).startup_error is None
    assert _plan("vllm", "qwen3-235b-a22b", tp=8).startup_error is None


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        # SGLang: gate_up_proj (merged) of layer 0's dense MLP, 18432 / 32 = 576 = 4.5 × 128
        ("sglang", "Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128."),
        # vLLM: gate_up skipped (merged mismatch allowed), down_proj's input slice 576 refuses
        ("vllm", "Weight input_size_per_partition = 576 is not divisible by weight quantization block_k = 128."),
    ],
)
def test_dense_block_quant_deepseek_v3_tp32(engine: str, message: str) -> None:
    # DeepSeek-V3: 3 dense layers first (first_k_dense_replace), intermediate_size 18432, fp8 128 × 128 blocks;
    # layer 0's MLP is built before any MoE layer, so its refusal is the one raised (the experts' 2048 / 32 = 64
    # would refuse next)
    p = _plan(engine, str(HF / "deepseek-v3" / "config.json"), tp=32, nodes=4, dp_attention=1)
    assert p.startup_error is not None and message in p.startup_error


def _qwen25_7b(tmp_path: Path, **over: object) -> str:
    """Qwen/Qwen2.5-7B-Instruct's config.json (the fields kvplan reads): 28 heads, 4 kv heads, bf16."""
    cfg = {
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
        "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28, "vocab_size": 152064,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16", "tie_word_embeddings": False, **over,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_heads_not_divisible_by_tp(tmp_path: Path) -> None:
    model = _qwen25_7b(tmp_path)
    p = _plan("vllm", model, tp=8)
    assert p.startup_error is not None
    assert "Total number of attention heads (28) must be divisible by tensor parallel size (8)." in p.startup_error
    p = _plan("sglang", model, tp=8)
    assert p.startup_error is not None and "total_num_heads % attn_tp_size == 0 (28 heads, attention tp 8)" in (
        p.startup_error
    )
    # 28 / 4 = 7 heads a rank, 4 kv heads: one each
    assert _plan("vllm", model, tp=4).startup_error is None


def test_kv_heads_neither_split_nor_replicated(tmp_path: Path) -> None:
    # 40 heads (Qwen3-14B's count) with 8 kv heads at tp 5: 40 / 5 = 8 heads a rank, but 8 kv heads over 5 ranks
    # neither split (8 % 5 = 3) nor replicate (5 % 8): QKVParallelLinear's divide(8, 5)
    model = _qwen25_7b(tmp_path, num_attention_heads=40, num_key_value_heads=8, hidden_size=5120)
    p = _plan("vllm", model, tp=5)
    assert p.startup_error is not None and "AssertionError: 8 is not divisible by 5" in p.startup_error
    p = _plan("sglang", model, tp=5)
    assert p.startup_error is not None and "total_num_kv_heads % attn_tp_size == 0 (8 kv heads" in p.startup_error


def test_experts_left_unquantized_load_at_any_tp(tmp_path: Path) -> None:
    # the same checkpoint with its experts in modules_to_not_convert: the experts are bf16, nothing to divide
    cfg = json.loads(Path(QWEN_FP8).read_text())
    cfg["quantization_config"]["modules_to_not_convert"] = ["mlp.experts", "lm_head"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert _plan("sglang", str(path), tp=8).startup_error is None


@pytest.mark.parametrize(("engine", "ep"), [("sglang", 2), ("vllm", 8)])
def test_admit_remedies_replan_ep_and_tp(engine: str, ep: int) -> None:
    # SGLang: ep 2 makes moe_tp 4, 1536 / 4 = 384 (the smallest ep dividing 8 that loads); vLLM: EP over all 8
    # ranks. Then the largest smaller tp that loads: 4. Each re-planned: its pool is the re-planned deployment's.
    p = _plan(engine, QWEN_FP8, tp=8)
    a = admit(p, Request(ctx_tokens=32768))
    by_knob = {r.knob: r for r in a.remedies}
    assert by_knob["ep"].value == ep and by_knob["tp"].value == 4
    assert by_knob["ep"].pool_tokens == _plan(engine, QWEN_FP8, tp=8, ep=ep).logged_tokens
    assert by_knob["tp"].pool_tokens == _plan(engine, QWEN_FP8, tp=4).logged_tokens


def test_fit_prunes_the_refusal_and_searches_whole_experts(tmp_path: Path) -> None:
    arch = load_model(QWEN_FP8)
    q = FitQuery(
        model_ref=QWEN_FP8,
        gpus=(find_gpu("h200"),),
        engines=("sglang", "vllm"),
        requirements=Requirements(concurrency=((1, 32768),)),
        max_gpus=8,
        mtp=(False,),
        exhaustive=True,
    )
    f = fit(arch, q)
    tp8 = [o for o in f.outcomes if o.deployment.tp == 8]
    refused = [o for o in tp8 if o.deployment.ep == 1]
    assert refused and all(o.pruned is not None and MOE_192 in o.pruned for o in refused)
    whole = [o for o in tp8 if o.deployment.ep == 8]
    assert whole and all(o.pruned is None for o in whole)
    # the emitted deployment carries ep: planned as-is it starts (without it, the engine would refuse it)
    path = tmp_path / "fit.yaml"
    path.write_text(deploy_yaml(whole[0]))
    dep = load_deployment(str(path))
    assert dep.ep == 8 and plan_pool(arch, dep).startup_error is None


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_mla_q_b_proj_one_head_a_rank(engine: str) -> None:
    # Kimi-K2 (MLA, 64 heads, qk_nope 128 + rope 64, fp8 128 × 128 blocks) at tp 64: layer 0's attention is built
    # before its dense MLP; q_b_proj, a single column split 64 ways, gives each rank 1 × 192 = 192 rows (1.5
    # blocks). SGLang's validate_block_quant_shapes and vLLM's validate_fp8_block_shape both check a split column.
    p = _plan(engine, str(HF / "kimi-k2" / "config.json"), tp=64, nodes=8, dp_attention=1)
    assert p.startup_error is not None
    assert "Weight output_partition_size = 192 is not divisible by weight quantization block_n = 128." in (
        p.startup_error
    )

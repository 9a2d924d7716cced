"""Weights in the model dtype the engine resolves (``--dtype``), not the checkpoint's torch_dtype.

Engine source (kvplan/engines/model_dtype.py cites it): vLLM ``vllm/config/model.py`` ``_get_and_verify_dtype`` /
``_resolve_auto_dtype`` and SGLang ``srt/configs/model_config.py`` ``_get_and_verify_dtype`` turn ``auto`` on a
float32 config into a 2-byte dtype (vLLM bf16, SGLang fp16); both loaders build the model under
``set_default_torch_dtype(model_config.dtype)`` (vLLM ``model_loader/utils.py initialize_model``, SGLang
``model_loader/loader.py DefaultModelLoader.load_model``), so unquantized parameters and the rotary cache
(``get_rope``: dtype None is ``torch.get_default_dtype()``) take the model dtype's bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.model_dtype import with_model_dtype
from kvplan.models.arch import Split
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
PARAMS_8B = 8_030_261_248
"""Llama-3.1-8B: embed + lm_head 2 × 128,256 × 4,096 = 1,050,673,152; 32 layers × (q, o 2 × 4,096² + k, v
2 × 1,024 × 4,096 + MLP 3 × 4,096 × 14,336 + 2 norms × 4,096) = 6,979,321,856; final norm 4,096."""
ROPE_POSITIONS_X_DIM = 131_072 * 128
"""Llama-3.1-8B's cos/sin cache: max_position_embeddings 131,072 × head_dim 128 (``get_rope``, one a process)."""
# what `kvplan budget --model <config> --set engine=vllm --set gpu=h100 --set tp=1 --set gpus_per_node=1` plans:
# the preset's model knobs (kv_cache_dtype fp8, page 64) are not applied to another model
H100_VLLM = [
    "engine=vllm", "tp=1", "gpus_per_node=1", "kv_cache_dtype=auto", "mla_layout=default",
    "attention_backend=default", "page_size=default", "speculative_num_draft_tokens=0",
]  # fmt: skip


def _float32_llama(tmp_path: Path) -> str:
    """Llama-3.1-8B's config.json as shipped, but with ``torch_dtype: float32`` (a float32 checkpoint)."""
    config = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())
    assert config["torch_dtype"] == "bfloat16"
    config["torch_dtype"] = "float32"
    folder = tmp_path / "llama-3.1-8b-fp32"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder / "config.json")


def _plan(model: str, *sets: str, gpu: str = "h100"):  # type: ignore[no-untyped-def]
    return plan_pool(load_model(model), load_deployment("glm-5.3-8xh200-sglang", [*H100_VLLM, f"gpu={gpu}", *sets]))


def _terms(plan) -> dict[str, int | None]:  # type: ignore[no-untyped-def]
    return {t.label: t.bytes for t in plan.chain}


@pytest.mark.parametrize("dtype", ["auto", "bfloat16"])
def test_float32_checkpoint_under_a_2_byte_dtype_plans_bf16_weights_and_pool(tmp_path: Path, dtype: str) -> None:
    # vLLM auto downcasts the float32 config to bf16 and builds the model in it: weights
    #   8,030,261,248 params × 2 B = 16,060,522,496 + rotary cache 131,072 × 128 × 2 B = 33,554,432
    #   = 16,094,076,928 (was 8,030,261,248 × 4 + 67,108,864 = 32,188,153,856)
    # the budget chain (vLLM 0.33.0 determine_available_memory, tests/engines/test_pinned_vllm_budget.py):
    #   requested ceil(85,044,756,480 × 0.92) = 78,241,175,962
    #   − weights 16,094,076,928 − torch peak 2,023,837,696 (bf16 sampler) − non-torch 268,435,456
    #   − CUDA-graph estimate 1,696,595,968 = 58,158,229,914 available
    #   num_blocks = 58,158,229,914 // (16 × 131,072 B) = 27,732 → 27,732 × 16 = 443,712 tokens (was 321,248)
    plan = _plan(_float32_llama(tmp_path), f"dtype={dtype}")
    terms = _terms(plan)
    assert terms["weights per GPU"] == PARAMS_8B * 2 + ROPE_POSITIONS_X_DIM * 2 == 16_094_076_928
    assert terms["requested"] == 78_241_175_962
    assert terms["torch peak (profiling run)"] == 2_023_837_696
    assert terms["available KV cache memory"] == 58_158_229_914
    assert 58_158_229_914 // (16 * 131_072) * 16 == 443_712
    assert plan.logged_tokens == 443_712
    # the engine builds the same bf16 model from the bf16 checkpoint: the same pool, term for term
    assert terms == _terms(_plan(str(HF / "llama-3.1-8b" / "config.json")))
    assert "cast on load from the checkpoint's 4-byte torch_dtype" in plan.knob("weights_per_gpu").origin


def test_dtype_float32_on_a_bf16_checkpoint_doubles_the_unquantized_weights() -> None:
    # --dtype float32: every parameter and the rotary cache in 4 B (vLLM kv_cache_dtype auto follows: 4-byte KV)
    #   8,030,261,248 × 4 = 32,121,044,992 + 131,072 × 128 × 4 = 67,108,864 → 32,188,153,856 (was 16,094,076,928)
    plan = _plan(str(HF / "llama-3.1-8b" / "config.json"), "dtype=float32")
    assert _terms(plan)["weights per GPU"] == PARAMS_8B * 4 + ROPE_POSITIONS_X_DIM * 4 == 32_188_153_856


def test_fp8_tensors_and_their_scales_keep_their_bytes_under_float32() -> None:
    # RedHatAI Llama-3.3-70B-FP8-dynamic (compressed-tensors, per-channel fp8): per tensor from its config,
    #   fp8 linear weights 68,451,041,280 B (1 B each) + their F32 weight_scale (one a row) 26,869,760 B: kept;
    #   bf16 embed + lm_head 2 × 128,256 × 8,192 × 2 = 4,202,692,608 + 161 norms × 8,192 × 2 = 2,637,824
    #   = 4,205,330,432 B → doubled under --dtype float32 to 8,410,660,864
    # on one GPU: 68,451,041,280 + 26,869,760 + 8,410,660,864 = 76,888,571,904 (was 72,683,241,472)
    # + vLLM's rotary cache 131,072 × 128 × 4 = 67,108,864 → 76,955,680,768
    plan = _plan(str(HF / "llama-3.3-70b-fp8-dynamic" / "config.json"), "dtype=float32", gpu="h200")
    assert _terms(plan)["weights per GPU"] == 68_451_041_280 + 26_869_760 + 8_410_660_864 + 67_108_864
    arch = load_model(str(HF / "llama-3.3-70b-fp8-dynamic" / "config.json"))
    cast = with_model_dtype(arch, load_deployment("glm-5.3-8xh200-sglang", [*H100_VLLM, "dtype=float32"]))
    one = Split.of(tp=1)
    assert arch.estimated_weights_per_gpu(one) == 68_451_041_280 + 26_869_760 + 4_205_330_432
    assert cast.estimated_weights_per_gpu(one) == 76_888_571_904
    fp8 = [p for g in cast.param_groups for p in getattr(g, "placed", ()) if p.dtype in ("F8_E4M3", "F32")]
    assert sum(p.nbytes for p in fp8) == 68_451_041_280 + 26_869_760


def test_a_2_byte_checkpoint_under_auto_is_unchanged_and_keeps_its_measured_point() -> None:
    # glm-5.3 (bf16 torch_dtype, fp8 linears) under auto: nothing to cast; its measured weights point stands
    arch = load_model("glm-5.3")
    assert with_model_dtype(arch, load_deployment("glm-5.3-8xh200-vllm", [])) is arch
    assert arch.measured_weights


def test_gpt_oss_keeps_its_float32_rotary_cache() -> None:
    # vLLM gpt_oss.py OAIAttention: get_rope(..., dtype=torch.float32): 4 B whatever --dtype says
    arch = load_model(str(HF / "gpt-oss-120b" / "config.json"))
    cast = with_model_dtype(arch, load_deployment("glm-5.3-8xh200-sglang", [*H100_VLLM, "dtype=float32"]))
    (before,) = [g for g in arch.param_groups if g.name == "rotary_cache"]
    (after,) = [g for g in cast.param_groups if g.name == "rotary_cache"]
    assert after.bytes_per_gpu(Split.of(tp=1)) == before.bytes_per_gpu(Split.of(tp=1)) > 0
    (embed,) = [g for g in cast.param_groups if g.name == "embeddings"]
    assert embed.bytes_per_param_num == 4


def test_sglang_float32_checkpoint_is_built_in_fp16(tmp_path: Path) -> None:
    # SGLang model_config.py _get_and_verify_dtype: auto on a float32 config is float16 ("Following the common
    # practice, we use float16 for float32 models"): weights 16,094,076,928 as the bf16 checkpoint's (was
    # 32,188,153,856); the chain (kvplan/engines/sglang.py, reference/sglang-0.5.23.md):
    #   free after weights 83,971,014,656 − 16,094,076,928 = 67,876,937,728; − the reserve (pre-load free ×
    #   (1 − mem_fraction_static), the same for both checkpoints) = 53,601,865,236 for the pool;
    #   // cell 131,072 B = 408,949 tokens (page 1) (was 286,161)
    sets = [*H100_VLLM, "engine=sglang", "gpu=h100"]
    sets.remove("engine=vllm")
    plan = plan_pool(load_model(_float32_llama(tmp_path)), load_deployment("glm-5.3-8xh200-sglang", sets))
    terms = _terms(plan)
    assert terms["weights per GPU"] == PARAMS_8B * 2 + ROPE_POSITIONS_X_DIM * 2 == 16_094_076_928
    assert terms["free after weights"] == 83_971_014_656 - 16_094_076_928 == 67_876_937_728
    assert terms["available for the KV pool"] == 53_601_865_236
    assert plan.logged_tokens == 53_601_865_236 // 131_072 == 408_949
    dep = load_deployment("glm-5.3-8xh200-sglang", sets)
    bf16 = plan_pool(load_model(str(HF / "llama-3.1-8b" / "config.json")), dep)
    assert terms == _terms(bf16)


@pytest.mark.parametrize(
    ("checkpoint", "dtype", "weights"),
    [
        # vLLM --quantization fp8 (Fp8OnlineLinearMethod): linears 1 B a weight whatever the model dtype;
        # linears 1,342,177,280 + 5,637,144,576 = 6,979,321,856 params × 1 B; the rest in the model dtype:
        # embed + head 1,050,673,152 + norms 266,240 params, rope 131,072 × 128
        ("fp32", "auto", 6_979_321_856 + (1_050_673_152 + 266_240 + 131_072 * 128) * 2),  # 9,114,755,072
        ("bf16", "float32", 6_979_321_856 + (1_050_673_152 + 266_240 + 131_072 * 128) * 4),  # 11,250,188,288
    ],
)
def test_online_fp8_takes_one_byte_a_linear_weight_in_any_model_dtype(
    tmp_path: Path, checkpoint: str, dtype: str, weights: int
) -> None:
    model = _float32_llama(tmp_path) if checkpoint == "fp32" else str(HF / "llama-3.1-8b" / "config.json")
    plan = _plan(model, "quantization=fp8", f"dtype={dtype}")
    assert _terms(plan)["weights per GPU"] == weights
    assert weights in (9_114_755_072, 11_250_188_288)


def test_a_measured_weights_point_stands_only_in_the_dtype_it_was_measured_in() -> None:
    # glm-5.3's measured point (vLLM recipes PR #893, 94.46 GiB a rank) was taken under --dtype auto, the bf16
    # checkpoint's 2-byte parameters: --dtype float32 builds 4-byte ones (set_default_torch_dtype), so the point no
    # longer describes them and is dropped; under auto a float32 checkpoint is downcast to 2 bytes, so it would stand
    arch = load_model("glm-5.3")
    assert arch.measured_weights and arch.checkpoint_dtype_bytes == 2
    f32 = load_deployment("glm-5.3-8xh200-vllm", ["dtype=float32"])
    assert with_model_dtype(arch, f32).measured_weights == ()

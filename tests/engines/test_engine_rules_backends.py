"""Attention backends per engine, version and GPU (issue 9, items 5 and 6).

Rules: kvplan/engines/backends.py (SGLang DSA_CHOICES and _dsa_split_backend_resolution; vLLM
platforms/cuda.py and platforms/rocm.py priorities). Cell sizes: 78 MLA layers, 21 indexer layers × 132 B.
"""

from __future__ import annotations

import pytest

from kvplan.errors import EXIT_BAD_INPUT, PlanError
from tests.conftest import make_plan

SGLANG = "glm-5.3-8xh200-sglang"
VLLM = "glm-5.3-8xh200-vllm"
IDX = 132 * 21  # 2,772 B of indexer per token


def knob(p, name: str) -> object:  # type: ignore[no-untyped-def]
    return p.knob(name).value


def test_unknown_sglang_backend_is_refused_with_the_valid_ones() -> None:
    # Before: attention_backend=bogus was accepted and planned as fp8_ds_mla.
    with pytest.raises(PlanError) as e:
        make_plan(SGLANG, attention_backend="bogus")
    assert e.value.exit_code == EXIT_BAD_INPUT
    msg = str(e.value)
    assert "'bogus' is not a backend" in msg and "SM90 (CUDA)" in msg
    # fp8 on SM90: the FlashMLA three, fa3 (SM80-SM90) and trtllm (accepted on SM90: SGLang's DCP override picks it
    # there); tilelang is bf16-only on CUDA; aiter/triton are ROCm; flashinfer_sparse_mla is SM12x
    assert msg.endswith("choose flashmla_sparse, flashmla_kv, flashmla_auto, fa3, trtllm")


def test_unknown_vllm_backend_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(PlanError) as e:
        make_plan(VLLM, attention_backend="bogus")
    # fp8 on SM90: FLASH_ATTN_MLA_SPARSE rejects a quantized cache; the SM100 FlashInfer and FA4 ones need SM10x
    assert str(e.value).endswith("choose FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_SM90")


@pytest.mark.parametrize(
    ("deploy", "sets", "why"),
    [
        (SGLANG, {"attention_backend": "tilelang"}, "tilelang with fp8 on CUDA"),
        (SGLANG, {"attention_backend": "aiter"}, "aiter is ROCm-only"),
        (SGLANG, {"gpu": "b200", "attention_backend": "fa3"}, "fa3 is SM80-SM90"),
        (SGLANG, {"gpu": "b200", "attention_backend": "flashmla_kv/fa3"}, "the decode side is checked too"),
        (SGLANG, {"gpu": "mi300x", "attention_backend": "flashmla_kv"}, "FlashMLA is CUDA"),
        (VLLM, {"attention_backend": "FLASHINFER_MLA_SPARSE"}, "SM10x only"),
        (VLLM, {"attention_backend": "FLASH_ATTN_MLA_SPARSE"}, "bf16 only; the preset is fp8"),
        (VLLM, {"gpu": "mi300x", "attention_backend": "FLASHMLA_SPARSE"}, "CUDA only"),
    ],
)
def test_backends_unsupported_here_are_refused(deploy: str, sets: dict[str, object], why: str) -> None:
    with pytest.raises(PlanError, match="is not supported"):
        make_plan(deploy, **sets)


def test_supported_explicit_backends_set_the_layout() -> None:
    # tilelang with bf16 on SM90: 1152 B rows -> 1,152 × 78 + 2,772 = 92,628 B per token
    p = make_plan(SGLANG, attention_backend="tilelang", kv_cache_dtype="bf16")
    assert p.cell.total_bytes == 1_152 * 78 + IDX == 92_628
    # the doctor's prefill/decode spelling: flashmla_sparse/fa3 with bf16
    assert make_plan(SGLANG, attention_backend="flashmla_sparse/fa3", kv_cache_dtype="bf16").cell.total_bytes == 92_628
    # trtllm on the decode side only: raw 576-B rows (calculate_mla_kv_cache_dim) -> 576 × 78 + 2,772 = 47,700
    assert make_plan(SGLANG, attention_backend="flashmla_kv/trtllm").cell.total_bytes == 47_700


@pytest.mark.parametrize("deploy", [SGLANG, VLLM])
def test_a100_cannot_serve_dsa(deploy: str) -> None:
    # Before: SGLang picked flashmla_kv (FlashMLA needs SM90+) and vLLM FLASHMLA_SPARSE on the A100 (SM80).
    with pytest.raises(PlanError) as e:
        make_plan(deploy, gpu="a100-80gb")
    assert str(e.value).startswith("the engine does not start: ")
    assert "SM80 (CUDA)" in str(e.value)


def test_vllm_on_mi300x_follows_rocm_rules() -> None:
    # Before: "fp8_e4m3 on SM0" and FLASHMLA_SPARSE with 656-B rows.
    # ROCm sparse MLA: ROCM_AITER_MLA_SPARSE, fp8 stored as the raw 576-B latent:
    # bytes per block = 64 × (576 × 78 + 2,772) = 64 × 47,700 = 3,052,800
    p = make_plan(VLLM, gpu="mi300x")
    assert knob(p, "attention_backend") == "ROCM_AITER_MLA_SPARSE"
    assert p.knob("attention_backend").origin == "default: fp8 on gfx942 (ROCm)"
    assert p.mla_layout.value == "fp8"
    assert p.extras["bytes_per_block"] == 64 * 47_700 == 3_052_800
    # auto on gfx942 is bf16 (the GlmMoeDsa fp8 default is SM10x only): 1,152 × 78 + 2,772 = 92,628 B
    auto = make_plan(VLLM, gpu="mi300x", kv_cache_dtype="auto")
    assert auto.knob("kv_cache_dtype").origin == "default: auto = bf16 on gfx942 (ROCm)"
    assert auto.cell.total_bytes == 92_628


def test_sglang_on_mi300x_follows_hip_rules() -> None:
    # HIP: DSA backends default to triton; any DSA backend on HIP stores raw 576-B fp8 rows: 47,700 B per token
    p = make_plan(SGLANG, gpu="mi300x")
    assert knob(p, "attention_backend") == "triton"
    assert "gfx942 (ROCm)" in p.knob("attention_backend").origin
    assert p.cell.total_bytes == 47_700
    # auto: torch reports major 9 for gfx942, so bf16 (not fp8): 92,628 B
    auto = make_plan(SGLANG, gpu="mi300x", kv_cache_dtype="auto")
    assert knob(auto, "kv_cache_dtype") == "bfloat16"
    assert auto.cell.total_bytes == 92_628


@pytest.mark.parametrize("deploy", [SGLANG, VLLM])
@pytest.mark.parametrize("gpu", ["mi300x", "h200", "b200"])
def test_no_knob_speaks_of_sm0(deploy: str, gpu: str) -> None:
    p = make_plan(deploy, gpu=gpu, kv_cache_dtype="auto")
    assert not any("SM0" in k.origin for k in p.knobs)


def test_sglang_glm_fp8_on_sm120_uses_flashinfer_sparse_mla() -> None:
    # _dsa_split_backend_resolution: GlmMoeDsa with fp8 on SM12x -> flashinfer_sparse_mla on both sides; it is not
    # one of calculate_mla_kv_cache_dim's raw cases, so fp8_ds_mla rows: 656 × 78 + 2,772 = 53,940 B per token.
    # (Not in the catalog: a custom SM120 GPU of the H200's size.)
    from dataclasses import replace

    from kvplan.engines import plan_pool
    from kvplan.models.deployment import load_deployment
    from kvplan.models.from_hf import load_model

    dep = load_deployment(SGLANG)
    p = plan_pool(load_model("glm-5.3"), replace(dep, gpu=replace(dep.gpu, sm=120, name="SM120 GPU")))
    assert p.knob("attention_backend").value == "flashinfer_sparse_mla"
    assert p.cell.total_bytes == 656 * 78 + IDX == 53_940

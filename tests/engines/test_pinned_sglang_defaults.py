"""kvplan/engines/sglang_defaults.py pinned on SGLang 0.5.23's own choices (mutation check seed 27456).

sglang 0.5.23 wheel:
- ``arg_groups/model_overrides/gpt_oss.py``: attention backend not set -> ``is_sm100``: trtllm_mha; Hopper: fa3;
  HIP: aiter; else triton (attention sinks).
- ``server_args.py get_default_attn_backend``: full attention on Hopper (SM 9.x) fa3; SM 10.x trtllm_mha; else
  flashinfer (an A100, SM 8.0).
- DSA (``_dsa_split_backend_resolution``, shared/reference/sglang-0.5.23.md §2.7): dcp > 1 sets both DSA backends
  to trtllm; otherwise fp8 KV on SM 9.x decodes with flashmla_kv.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.sglang_defaults import for_vlm, mha_backend, mla_backend
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.versions import sglang_rules

RULES = sglang_rules("0.5.23")


def _mha(model: str, gpu: str) -> str:
    dep = load_deployment("glm-5.3-8xh200-sglang", (f"model={model}", f"gpu={gpu}"))
    return mha_backend(load_model(model), dep, RULES)[0]


def test_gpt_oss_takes_trtllm_mha_on_sm100_fa3_on_hopper_else_triton() -> None:
    assert _mha("gpt-oss-120b", "b200") == "trtllm_mha"
    assert _mha("gpt-oss-120b", "h100") == "fa3"
    assert _mha("gpt-oss-120b", "a100") == "triton"


def test_full_attention_is_fa3_only_on_hopper() -> None:
    assert _mha("llama-3.1-8b", "h100") == "fa3"
    assert _mha("llama-3.1-8b", "a100") == "flashinfer"


def test_dsa_takes_trtllm_only_when_dcp_splits_the_context() -> None:
    arch = load_model("glm-5.3")
    one = load_deployment("glm-5.3-8xh200-sglang", ("dcp=1",))
    two = load_deployment("glm-5.3-8xh200-sglang", ("dcp=2",))
    assert mla_backend(arch, one, RULES, "fp8_e4m3")[0] == "flashmla_kv"  # H200: SM 9.0, fp8 KV
    assert mla_backend(arch, two, RULES, "fp8_e4m3")[0] == "trtllm"


def _vlm(layers: int, hidden: int) -> object:
    return replace(load_model("llama-3.1-8b"), vision_tower=(layers, hidden))


def test_the_vision_tower_scales_mem_fraction_as_sglang_does() -> None:
    # arg_groups/memory_hook.py adjust_mem_fraction_for_vlm (no post-capture KV sizing): 0.95 × clamp(1 − 0.1 ×
    # (layers × hidden² / (24 × 1024²) − 1), 0.8, 1.05)
    cases = {
        (24, 1024): 0.95,  # ViT-L/14, the baseline: ratio 1
        (27, 1152): 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1)),  # ratio 1.423828125: 0.909736328125
        (48, 2048): 0.95 * 0.8,  # ratio 8: 1 − 0.7 clamped up to 0.8
        (12, 512): 0.95 * 1.05,  # ratio 0.125: 1.0875 clamped down to 1.05
    }
    for (layers, hidden), factor in cases.items():
        mfs, why = for_vlm(_vlm(layers, hidden), 0.8, "base")  # type: ignore[arg-type]
        assert mfs == pytest.approx(0.8 * factor, rel=1e-12), (layers, hidden)
        assert why == f"base; × {factor:.4f} for the vision tower ({layers} layers × {hidden}: VLM)"
    assert for_vlm(load_model("llama-3.1-8b"), 0.8, "base") == (0.8, "base")  # no vision tower: unchanged


def test_sm12x_glm_fp8_and_sm100_fp8_dsa_backends() -> None:
    # _dsa_split_backend_resolution: GLM (GlmMoeDsa) fp8 on SM 12.x flashinfer_sparse_mla; fp8 on SM >= 10.0 trtllm
    arch = load_model("glm-5.3")
    for gpu, want in (("rtx-pro-6000", "flashinfer_sparse_mla"), ("b200", "trtllm"), ("h200", "flashmla_kv")):
        dep = load_deployment("glm-5.3-8xh200-sglang", (f"gpu={gpu}",))
        assert mla_backend(arch, dep, RULES, "fp8_e4m3")[0] == want, gpu
    # bf16 DSA: prefill flashmla_sparse, decode trtllm from SM 10.0 (B200: SM 10.0, the boundary), fa3 on Hopper
    for gpu, want in (("b200", "flashmla_sparse/trtllm"), ("h200", "flashmla_sparse/fa3")):
        dep = load_deployment("glm-5.3-8xh200-sglang", (f"gpu={gpu}",))
        assert dep.gpu.sm in (100, 90) and mla_backend(arch, dep, RULES, "bf16")[0] == want, gpu


def test_sm100_before_trtllm_mha_says_why_flashinfer() -> None:
    # get_default_attn_backend: is_sm100_supported -> trtllm_mha only from sgl-project/sglang#14291 (0.5.6.post1);
    # SGLang 0.5.5 on a B200 (SM 10.0) takes the else branch, flashinfer, and the plan says why
    dep = load_deployment("glm-5.3-8xh200-sglang", ("model=llama-3.1-8b", "gpu=b200"))
    backend, why = mha_backend(load_model("llama-3.1-8b"), dep, sglang_rules("0.5.5"))
    assert backend == "flashinfer"
    assert why.endswith("(trtllm_mha is the SM100 default only from 0.5.6.post1; SGLang 0.5.5 picks flashinfer)")

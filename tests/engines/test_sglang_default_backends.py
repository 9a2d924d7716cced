"""The attention backend each engine picks by default, per version and platform (issue 23 item 9).

SGLang's choice for a full-attention model (0.4.x ``model_runner.py model_specific_adjustment``; 0.5.23
``server_args.py get_default_attn_backend``): Hopper -> fa3; ``is_sm100_supported`` (major == 10) -> trtllm_mha,
only from sgl-project/sglang#14291 (0.5.6.post1); HIP -> aiter; else flashinfer ("trtllm_mha does not support
SM120, which will fall back to flashinfer"). Plain MLA: Hopper fa3, SM10x flashinfer (trtllm_mla for
DeepseekV3ForCausalLM, ``_handle_model_specific_adjustments``), HIP aiter, else triton. vLLM dense MLA
(``platforms/cuda.py _get_backend_priorities`` and each backend's compute-capability check): FLASHINFER_MLA on SM10x,
FLASH_ATTN_MLA / FLASHMLA on SM9x, else TRITON_MLA.
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model


def _plan(engine: str, version: str, gpu: str, model: str, *sets: str) -> PoolPlan:
    base = [f"engine_version={version}", f"gpu={gpu}", f"model={model}", "kv_cache_dtype=auto", "page_size=default"]
    dep = load_deployment(f"glm-5.3-8xh200-{engine}", [*base, *sets])
    return plan_pool(load_model(model), dep)


ONE = ("tp=1", "nodes=1", "gpus_per_node=1")


@pytest.mark.parametrize(
    ("version", "gpu", "backend", "page"),
    [
        # the issue's case: SGLang 0.4.10 on an SM120 card. 0.4.10's MHA branch: not Hopper, not HIP -> flashinfer
        # (page 1); kvplan used to default trtllm_mha here and then refuse it
        ("0.4.10", "rtx-5090", "flashinfer", 1),
        ("0.4.10", "rtx-pro-6000", "flashinfer", 1),
        ("0.5.23", "rtx-5090", "flashinfer", 1),  # is_sm100 is major == 10: SM120 falls through to flashinfer
        ("0.5.23", "gb10", "flashinfer", 1),  # SM121 likewise
        # SM100 before #14291: flashinfer; from 0.5.6.post1 trtllm_mha, whose page is 64 (PAGE_BY_BACKEND)
        ("0.4.10", "b200", "flashinfer", 1),
        ("0.5.6", "b200", "flashinfer", 1),
        ("0.5.6.post1", "b200", "trtllm_mha", 64),
        ("0.5.23", "b200", "trtllm_mha", 64),
        ("0.5.23", "h200", "fa3", 1),
        ("0.5.23", "mi300x", "aiter", 1),
        ("0.5.23", "a100", "flashinfer", 1),
    ],
)
def test_sglang_full_attention_default(version: str, gpu: str, backend: str, page: int) -> None:
    p = _plan("sglang", version, gpu, "llama-3.1-8b", *ONE)
    k = p.knob("attention_backend")
    assert (k.value, k.defaulted, p.page_tokens) == (backend, True, page)


def test_sglang_0_5_6_post_releases_name_their_own_sm12x_failure() -> None:
    # #14291 picked trtllm_mha on any Blackwell until #14842 (0.5.7): kvplan plans flashinfer and says what the
    # engine itself does
    k = _plan("sglang", "0.5.6.post1", "rtx-5090", "llama-3.1-8b", *ONE).knob("attention_backend")
    assert k.value == "flashinfer" and "picks trtllm_mha on SM12x and refuses it" in k.origin
    assert "refuses" not in _plan("sglang", "0.5.7", "rtx-5090", "llama-3.1-8b", *ONE).knob("attention_backend").origin


@pytest.mark.parametrize(
    ("engine", "gpu", "backend"),
    [
        ("sglang", "rtx-pro-6000", "triton"),  # neither Hopper nor SM100 nor HIP (was trtllm_mla, then refused)
        ("sglang", "b200", "trtllm_mla"),  # DeepseekV3ForCausalLM on SM100
        ("sglang", "h200", "fa3"),
        ("sglang", "a100", "triton"),
        ("vllm", "rtx-pro-6000", "TRITON_MLA"),  # FLASHINFER_MLA is SM10x only (was picked, then refused)
        ("vllm", "b200", "FLASHINFER_MLA"),
    ],
)
def test_plain_mla_default(engine: str, gpu: str, backend: str) -> None:
    assert (
        _plan(engine, "0.5.23" if engine == "sglang" else "0.33.0", gpu, "deepseek-v3").knob("attention_backend").value
        == backend
    )


def test_glm5_on_rocm_with_a_0_5_8_post1_image_is_planned_with_the_0_5_9_pool() -> None:
    """GLM-5 on 8 x MI300X (gfx942), SGLang 0.5.8.post1 (the version string of rocm/sgl-dev:v0.5.8.post1-... images,
    which serve GLM-5). 0.5.9's cell (reference §10): bf16 on HIP (``auto``: major 9 under HIP, not >= 10), the
    (kv_lora_rank 512 + rope 64) × 2 B row on all 78 layers = 89,856 B, and the indexer K (132 B) on every layer
    = 10,296 B; 100,152 B a token. The same plan as 0.5.9 itself."""
    p = _plan("sglang", "0.5.8.post1", "mi300x", "glm-5")
    assert (p.cell.main_bytes, p.cell.indexer_bytes) == (78 * 576 * 2, 78 * 132) == (89_856, 10_296)
    assert p.knob("kv_cache_dtype").value == "bfloat16" and p.startup_error is None
    q = _plan("sglang", "0.5.9", "mi300x", "glm-5")
    assert (p.cell.total_bytes, p.logged_tokens) == (q.cell.total_bytes, q.logged_tokens)
    # 0.5.8 itself has no GlmMoeDsa model: refused, naming what SGLang lacks and where the pool arrived
    with pytest.raises(InputError, match=r"0\.5\.8 .*has no GlmMoeDsaForCausalLM model: its DSA pool came with"):
        _plan("sglang", "0.5.8", "mi300x", "glm-5")


def test_deepseek_v32_on_sm120_names_the_engines_own_pick() -> None:
    # auto -> fp8_e4m3 (major >= 10), _dsa_split_backend_resolution -> trtllm, SM100-only kernels: the engine's
    # failure, said as such
    with pytest.raises(InputError, match=r"the engine does not start: SGLang 0\.5\.23 picks trtllm by default"):
        _plan("sglang", "0.5.23", "rtx-pro-6000", "deepseek-v3.2")

"""kvplan.engines.vllm_defaults pinned: the backend vLLM picks, the block it forces, the MLA row (mutation check).

Engine source read (vllm-project/vllm):
- ``platforms/cuda.py _get_backend_priorities``: MLA on SM10x FLASHINFER_MLA first (``FlashInferMLABackend.
  supports_compute_capability``: major == 10), FLASHMLA / FLASH_ATTN_MLA on SM9x (FLASH_ATTN_MLA takes no fp8
  cache), TRITON_MLA elsewhere; non-MLA FLASHINFER first on SM10x, else FLASH_ATTN; ``platforms/rocm.py``:
  ROCM_AITER_MLA for MLA, TRITON_ATTN for full attention.
- ``get_supported_kernel_block_sizes``: ``v1/attention/backends/mla/flashinfer_mla.py`` [32, 64],
  ``cutlass_mla.py`` [128], ``flashmla.py`` [64], ``rocm_aiter_mla.py`` [1]; every other backend leaves
  ``CacheConfig.DEFAULT_BLOCK_SIZE`` 16 (``Platform.update_block_size_for_backend`` picks the smallest size).
- ``GlmMoeDsaForCausalLM.verify_and_update_config``: kv cache fp8_e4m3 on SM10x only; the DSA indexer backend
  accepts [64] on CUDA (``DeepseekV32IndexerBackend``).
DeepSeek-V3 (61 layers, MLA kv_lora_rank 512 + rope 64): bf16 (512 + 64) × 2 = 1,152 B a layer, raw fp8 576 B.
"""

from __future__ import annotations

import pytest

from kvplan.errors import PlanError
from tests.conftest import make_plan

VLLM = "glm-5.3-8xh200-vllm"
DEFAULTS = {"speculative_num_draft_tokens": 0, "mla_layout": "default", "attention_backend": "default"}
V3 = {**DEFAULTS, "model": "deepseek-v3", "kv_cache_dtype": "auto", "page_size": "default"}


@pytest.mark.parametrize(
    ("gpu", "sets", "backend", "block", "row"),
    [
        ("b200", {}, "FLASHINFER_MLA", 32, 1_152),  # SM100: FlashInfer MLA, smallest kernel block 32
        ("b200", {"attention_backend": "CUTLASS_MLA"}, "CUTLASS_MLA", 128, 1_152),  # forced 128
        ("h200", {}, "FLASH_ATTN_MLA", 16, 1_152),  # SM90 bf16: FA MLA, DEFAULT_BLOCK_SIZE 16
        ("h200", {"kv_cache_dtype": "fp8"}, "FLASHMLA", 64, 576),  # SM90 fp8: FlashMLA [64], raw 576-B rows
        ("a100-80gb", {}, "TRITON_MLA", 16, 1_152),  # SM80: neither FA MLA (SM9x) nor FlashInfer MLA (SM10x)
        ("mi300x", {}, "ROCM_AITER_MLA", 1, 1_152),  # ROCm: AITER MLA, kernel block 1
    ],
)
def test_dense_mla_backend_block_and_row(gpu: str, sets: dict[str, object], backend: str, block: int, row: int) -> None:
    p = make_plan(VLLM, **{**V3, "gpu": gpu, **sets})
    assert p.knob("attention_backend").value == backend
    assert p.page_tokens == block
    assert p.cell.total_bytes == 61 * row


@pytest.mark.parametrize(
    ("gpu", "backend"),
    [
        ("b200", "FLASHINFER"),
        ("h200", "FLASH_ATTN"),
        ("l40s", "FLASH_ATTN"),
        ("a100-80gb", "FLASH_ATTN"),  # SM80, the lowest FlashAttention 2 runs on (sm >= 80): not TRITON_ATTN
        ("mi300x", "TRITON_ATTN"),
    ],
)
def test_full_attention_backend(gpu: str, backend: str) -> None:
    p = make_plan(VLLM, **{**DEFAULTS, "model": "llama-3.1-8b", "tp": 1, "gpu": gpu, "kv_cache_dtype": "auto",
                           "page_size": "default"})  # fmt: skip
    assert p.knob("attention_backend").value == backend
    assert p.knob("kv_cache_dtype").value == "auto"
    assert p.page_tokens == 16  # none of these lists a kernel block: DEFAULT_BLOCK_SIZE


@pytest.mark.parametrize(
    ("gpu", "dtype", "backend", "layout"),
    [
        # GlmMoeDsa sets fp8_e4m3 on SM10x: the quantized sparse path FLASHINFER_MLA_SPARSE, raw 576-B rows
        ("b200", "fp8_e4m3", "FLASHINFER_MLA_SPARSE", "fp8"),
        # SM90 keeps auto = bf16: FLASH_ATTN_MLA_SPARSE, 1,152-B rows
        ("h200", "auto", "FLASH_ATTN_MLA_SPARSE", "bf16"),
    ],
)
def test_dsa_default_dtype_and_backend(gpu: str, dtype: str, backend: str, layout: str) -> None:
    p = make_plan(VLLM, **{**DEFAULTS, "gpu": gpu, "kv_cache_dtype": "auto"})
    assert p.knob("kv_cache_dtype").value == dtype
    assert p.knob("attention_backend").value == backend
    assert p.mla_layout.value == layout
    assert p.page_tokens == 64


def test_dsa_block_multiple_of_64_on_cuda() -> None:
    # DeepseekV32IndexerBackend lists [64] on CUDA: 128 (a multiple) is accepted, 32 and 96 are not
    assert make_plan(VLLM, page_size=128).page_tokens == 128
    for bad in (32, 96):
        with pytest.raises(PlanError) as e:
            make_plan(VLLM, page_size=bad)
        assert str(e.value) == (f"block_size {bad}: the DeepSeek-V3.2 indexer backend supports multiples of 64 on CUDA")
    # on ROCm the indexer lists [1, MultipleOf(16)]: 16 is accepted there
    assert make_plan(VLLM, gpu="mi300x", page_size=16).page_tokens == 16


@pytest.mark.parametrize(("dtype", "layout"), [("auto", "bf16"), ("fp8", "fp8")])
def test_glm5_next_plan_carries_the_cache_dtype(dtype: str, layout: str) -> None:
    # GLM-5.3-Flash on SM90: FLASHINFER_MLA_SPARSE_SM90 keeps the cache dtype as given (its supported_kv_cache_dtypes
    # take auto and fp8; raw rows, no fp8_ds_mla rewrite): the plan's kv dtype is that dtype, not the backend
    p = make_plan(VLLM, model="glm-5.3-flash", tp=1, kv_cache_dtype=dtype, **DEFAULTS)
    assert p.kv_dtype == dtype
    assert p.knob("attention_backend").value == "FLASHINFER_MLA_SPARSE_SM90"
    assert p.mla_layout.value == layout

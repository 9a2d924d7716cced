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


# vLLM 0.18.0 on (kvplan.versions.BLOCK_SIZE_CHECKED_SINCE): a given --block-size reaches backend selection
# (v1/attention/selector.py: `if cache_config.user_specified_block_size: block_size = cache_config.block_size`), and
# AttentionBackend.validate_configuration appends 'block_size not supported' unless supports_block_size: some listed
# kernel size s (MultipleOf(n) read as n) with block_size % s == 0. A selected backend then fails in
# CudaPlatform.get_attn_backend_cls: f"Selected backend {selected_backend} is not valid for this configuration.
# Reason: {invalid_reasons}". Kernel sizes: mla/flashmla.py [64], mla/cutlass_mla.py [128], flashinfer.py [16, 32,
# 64] (wheels 0.18.0, 0.21.0, 0.33.0)
@pytest.mark.parametrize(
    ("gpu", "sets", "block", "backend", "multiple"),
    [
        ("h200", {"model": "deepseek-v3", "kv_cache_dtype": "fp8"}, 16, "FLASHMLA", 64),  # 16 % 64 = 16
        ("h200", {"model": "deepseek-v3", "kv_cache_dtype": "fp8"}, 96, "FLASHMLA", 64),  # 96 % 64 = 32
        ("b200", {"model": "deepseek-v3"}, 64, "CUTLASS_MLA", 128),  # 64 % 128 = 64
        ("b200", {"model": "llama-3.1-8b", "tp": 1}, 8, "FLASHINFER", 16),  # 8 % 16, % 32, % 64 all 8
    ],
)
def test_a_block_the_selected_backend_cannot_take_is_refused(
    gpu: str, sets: dict[str, object], block: int, backend: str, multiple: int
) -> None:
    with pytest.raises(PlanError) as e:
        make_plan(VLLM, **{**V3, **sets, "gpu": gpu, "attention_backend": backend, "page_size": block})
    assert str(e.value) == (
        f"vLLM refuses it: ValueError: Selected backend {backend} is not valid for this configuration. Reason: "
        f"['block_size not supported'] (block_size {block}: {backend} takes multiples of {multiple} "
        "(get_supported_kernel_block_sizes))"
    )


@pytest.mark.parametrize(
    ("gpu", "sets", "block", "backend"),
    [
        # "With hybrid_blocks feature, the framework-level block size only needs to be a multiple of the kernel's
        # requirement" (supports_block_size): 128 = 2 × 64, 256 = 2 × 128, 48 = 3 × 16 start as given
        ("h200", {"model": "deepseek-v3", "kv_cache_dtype": "fp8"}, 128, "FLASHMLA"),
        ("b200", {"model": "deepseek-v3"}, 256, "CUTLASS_MLA"),
        ("b200", {"model": "llama-3.1-8b", "tp": 1}, 48, "FLASHINFER"),
    ],
)
def test_a_multiple_of_the_kernel_block_is_kept(gpu: str, sets: dict[str, object], block: int, backend: str) -> None:
    p = make_plan(VLLM, **{**V3, **sets, "gpu": gpu, "attention_backend": backend, "page_size": block})
    assert (p.page_tokens, p.knob("attention_backend").value) == (block, backend)


def test_a_block_the_default_backend_cannot_take_is_refused() -> None:
    # B200, DeepSeek-V3 bf16: the default is FLASHINFER_MLA ([32, 64]); a given 16 makes validate_configuration
    # pass it over for a lower-priority backend ("--block-size 16 precluded higher-priority backend(s)
    # FLASHINFER_MLA", cuda.py get_attn_backend_cls), a choice kvplan does not plan: one line, exit 2
    with pytest.raises(PlanError) as e:
        make_plan(VLLM, **{**V3, "gpu": "b200", "page_size": 16})
    assert str(e.value) == (
        "block_size 16: FLASHINFER_MLA takes multiples of 32 (get_supported_kernel_block_sizes), so vLLM 0.33.0 "
        "passes over its default FLASHINFER_MLA for a lower-priority backend, or finds none ('No valid attention "
        "backend found'); kvplan does not plan that choice: set a multiple of 32, or attention_backend"
    )
    assert make_plan(VLLM, **{**V3, "gpu": "b200", "page_size": 32}).page_tokens == 32  # 32 % 32 = 0


@pytest.mark.parametrize(("version", "refused"), [("0.17.1", False), ("0.18.0", True)])
def test_the_block_check_starts_at_0_18(version: str, refused: bool) -> None:
    # 0.17.1's CudaPlatform.get_attn_backend_cls drops the block size (attn_selector_config._replace(block_size=
    # None)) and check_and_update_config forces FlashMLA's own ("Forcing kv cache block size to 64 for FlashMLA
    # backend."): it starts, so kvplan does not refuse it (the forced 64 is not modelled before 0.18: the plan keeps
    # 16, named as given); 0.18.0 passes the user's block to the selector and refuses FLASHMLA at 16
    sets = {**V3, "gpu": "h200", "kv_cache_dtype": "fp8", "attention_backend": "FLASHMLA", "page_size": 16}
    if refused:
        with pytest.raises(PlanError, match=r"Selected backend FLASHMLA is not valid"):
            make_plan(VLLM, **sets, engine_version=version)
    else:
        make_plan(VLLM, **sets, engine_version=version)


def test_blocks_the_rocm_backends_take() -> None:
    # mla/rocm_aiter_mla.py [MultipleOf(1)], and aiter_triton_mla.py's AiterTritonMLABackend inherits it: any block,
    # 3 included, starts; DSA on ROCm: rocm_aiter_mla_sparse.py [1, MultipleOf(16)] and the indexer's [1,
    # MultipleOf(16)] take 1 (only the CUDA indexer's [64] binds a DSA block, test_dsa_block_multiple_of_64_on_cuda)
    sets = {**V3, "gpu": "mi300x", "attention_backend": "ROCM_AITER_TRITON_MLA", "page_size": 3}
    assert make_plan(VLLM, **sets).page_tokens == 3
    p = make_plan(VLLM, gpu="mi300x", page_size=1)
    assert (p.page_tokens, p.knob("attention_backend").value) == (1, "ROCM_AITER_MLA_SPARSE")

"""Goldens for full-attention (GQA) and plain-MLA models on both engines, derived from the engines' source.

SGLang 0.5.23 (docs/engines.md):
- cell = kv_heads_per_rank × (head_dim + v_head_dim) × dtype bytes × layers (``_compute_cell_size``, MHA branch),
  kv_heads_per_rank = max(1, num_key_value_heads // (tp / dp_attention)) (``ModelConfig.get_num_kv_heads``);
- mem_fraction_static: reserved = 512 + max(chunk, 2048) × 1.5 + tp × pp / 8 × 1024 + decode graph max_bs × 2
  + (DP attention: max_bs × dp × 3, + max_bs × dp × 1.5 past 300) + prefill graph: 1,536 MiB with an MLA
  backend, else len(prefill capture sizes up to chunked_prefill_size) × 8 = 58 × 8 = 464 MiB at 8,192
  (``memory_hook.reserve_for_graph_mb``); mfs = round((gpu_mem − reserved) / gpu_mem, 3), gpu_mem = 143,771 MiB;
- available = int(((pre − W) / GiB − pre / GiB × (1 − mfs)) × GiB); rows = available // cell // page × page;
  page 1 under fa3 (the SM90 default for these models).
vLLM 0.33.0:
- FullAttentionSpec page = block × num_kv_heads (max(1, total // tp)) × (head_size + head_size_v) × dtype bytes;
  block 16 (DEFAULT_BLOCK_SIZE, FLASH_ATTN on SM90); one KV cache group; num_blocks = available // Σ pages;
- MLAAttentionSpec page = block × (kv_lora_rank + rope) × dtype bytes (576 × 2 bf16, 576 raw fp8);
  FLASH_ATTN_MLA (bf16, block 16), FLASHMLA (fp8, block 64) on SM90.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.sglang import prefill_graph_batch_sizes
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB, MiB

PRE = 143_771 * MiB
"""pre-load free memory set to the H200's NVML total in MiB, as tests/engines/test_sglang.py does."""
W = 20 * GiB
"""weights per GPU, set so the goldens do not depend on the weights estimate."""


def _plan(engine: str, model: str, **sets: object) -> PoolPlan:
    base = {"context_length": 32768, "weights_per_gpu": "20GiB", **sets}
    if engine == "sglang":
        base["pre_load_free"] = "143771MiB"
    dep = load_deployment(f"glm-5.3-8xh200-{engine}", [f"{k}={v}" for k, v in base.items()])
    # the preset pins GLM-5.3's fp8 cache and 64-token pages: give these models the engines' own defaults
    dep = replace(
        dep,
        model=model,
        kv_cache_dtype=str(sets.get("kv_cache_dtype", "auto")),
        page_size=sets.get("page_size"),  # type: ignore[arg-type]
    )
    return plan_pool(load_model(model), dep)


def _sglang_available(mfs: float) -> int:
    return int(((PRE - W) / GiB - PRE / GiB * (1 - mfs)) * GiB)


def test_prefill_capture_sizes() -> None:
    # range(4, 33, 4): 8; range(48, 257, 16): 14; range(288, 513, 32): 8; range(576, 1025, 64): 8;
    # range(1280, 4097, 256): 12; range(4608, 8193, 512): 8 -> 58 sizes at chunked_prefill_size 8,192
    assert len(prefill_graph_batch_sizes(8192)) == 8 + 14 + 8 + 8 + 12 + 8


# --------------------------------------------------------------------------- SGLang


@pytest.mark.parametrize(
    ("tp", "heads", "cell", "reserved", "mfs"),
    [
        # TP8: 8 kv heads // 8 = 1 per rank: 1 × (128 + 128) × 2 B × 80 layers = 40,960 B/token
        # reserved = 512 + 12,288 + 8/8 × 1024 + 512 × 2 + 58 × 8 = 15,312 MiB; (143,771 − 15,312) / 143,771
        # = 0.89350 -> 0.893
        (8, 1, 40_960, 15_312, 0.893),
        # TP4: 2 per rank: 2 × 256 × 2 × 80 = 81,920 B; reserved = 512 + 12,288 + 512 + 1,024 + 464 = 14,800 MiB;
        # (143,771 − 14,800) / 143,771 = 0.89706 -> 0.897
        (4, 2, 81_920, 14_800, 0.897),
    ],
)
def test_sglang_llama_70b_bf16(tp: int, heads: int, cell: int, reserved: int, mfs: float) -> None:
    p = _plan("sglang", "llama-3.1-70b", tp=tp)
    assert p.kv_format == "bf16" and p.mla_layout is None
    assert p.mla_bytes_per_layer == heads * (128 + 128) * 2
    assert p.cell.total_bytes == cell and p.cell.indexer_bytes == 0
    assert p.extras["mem_fraction_reserved_mib"] == reserved
    assert p.knob("mem_fraction_static").value == mfs
    assert p.page_tokens == 1  # fa3 keeps page_size 1
    assert p.available_bytes == _sglang_available(mfs)
    assert p.rows == _sglang_available(mfs) // cell
    # MHATokenToKVPool: k_buffer and v_buffer of (rows + 1) × heads × 128 per layer, bf16
    assert p.allocated_bytes == (p.rows + 1) * heads * (128 + 128) * 2 * 80


def test_sglang_llama_70b_tp8_rows() -> None:
    # available = int(((143,771 MiB − 20 GiB) / GiB − 140.4014 GiB × (1 − 0.893)) × GiB)
    #           = int((120.40137 − 15.02295) GiB) = 113,149,217,865 B
    # rows = 113,149,217,865 // 40,960 = 2,762,432 (page 1)
    p = _plan("sglang", "llama-3.1-70b", tp=8)
    assert p.available_bytes == 113_149_217_865
    assert p.rows == 113_149_217_865 // 40_960 == 2_762_432


@pytest.mark.parametrize(
    ("dtype", "cell"),
    [
        # 4 kv heads < 8 ranks: max(1, 4 // 8) = 1 head per rank (replicated); 94 layers × 1 × 256 × 2 = 48,128
        ("bf16", 48_128),
        # fp8_e4m3: 1 B per element: 94 × 256 = 24,064
        ("fp8_e4m3", 24_064),
    ],
)
def test_sglang_qwen3_235b_tp8_kv_heads_replicated(dtype: str, cell: int) -> None:
    p = _plan("sglang", "qwen3-235b-a22b", tp=8, kv_cache_dtype=dtype)
    assert p.cell.total_bytes == cell
    assert p.rows == _sglang_available(0.893) // cell
    assert p.arch.attention.replicated(8)  # type: ignore[union-attr]


def test_sglang_glm45_air_tp4_dp2() -> None:
    # attention TP = 4 / 2 = 2: 8 kv heads // 2 = 4 per rank: 4 × (128 + 128) × 2 × 46 layers = 94,208 B
    # reserved = 512 + 12,288 + 4/8 × 1024 + 512 × 2 + DP attention (512 × 2 × 3 + 512 × 2 × 1.5, max_bs > 300)
    #          + 58 × 8 = 512 + 12,288 + 512 + 1,024 + 4,608 + 464 = 19,408 MiB; (143,771 − 19,408) / 143,771 = 0.865
    p = _plan("sglang", "glm-4.5-air", tp=4, dp_attention=2)
    assert p.attn_tp == 2
    assert p.cell.total_bytes == 94_208
    assert p.extras["mem_fraction_reserved_mib"] == 19_408
    assert p.knob("mem_fraction_static").value == 0.865
    assert p.rows == _sglang_available(0.865) // 94_208


@pytest.mark.parametrize(
    ("dtype", "row", "layout"),
    [
        # plain MLA, no indexer: bf16 (512 + 64) × 2 = 1,152 B per layer, × 61 = 70,272 B
        ("bf16", 1152, "bf16"),
        # fp8 under fa3: raw latent 512 + 64 = 576 B per layer, × 61 = 35,136 B
        ("fp8_e4m3", 576, "fp8"),
    ],
)
def test_sglang_deepseek_v3_no_indexer(dtype: str, row: int, layout: str) -> None:
    p = _plan("sglang", "deepseek-v3", tp=8, kv_cache_dtype=dtype)
    assert (p.kv_format, p.mla_bytes_per_layer) == (layout, row)
    assert p.cell.total_bytes == row * 61 and p.cell.indexer_bytes == 0 and p.indexer_layers == 0
    # MLA keeps the 1,536 MiB prefill-graph reserve: 512 + 12,288 + 1,024 + 1,024 + 1,536 = 16,384 -> 0.886
    assert p.knob("mem_fraction_static").value == 0.886
    assert p.rows == _sglang_available(0.886) // (row * 61)


def test_sglang_dcp_refused_for_full_attention() -> None:
    with pytest.raises(PlanError, match="full-attention"):
        _plan("sglang", "llama-3.1-70b", tp=8, dcp=8)


# --------------------------------------------------------------------------- vLLM


def _vllm_available(p: PoolPlan) -> int:
    # requested = ceil(CUDA total × 0.92); available = requested − weights − non-KV other (no DSA buffers)
    return math.ceil(p.deployment.gpu.cuda_total_bytes * 0.92) - W - p.knob("non_kv_other").as_int()


@pytest.mark.parametrize(
    ("tp", "page"),
    [
        # TP8: page = 16 × 1 head × (128 + 128) × 2 B = 8,192 B per layer; 80 layers: 655,360 B per block
        (8, 8_192),
        # TP4: 2 heads: 16,384 B per layer; 1,310,720 B per block
        (4, 16_384),
    ],
)
def test_vllm_llama_70b_bf16(tp: int, page: int) -> None:
    p = _plan("vllm", "llama-3.1-70b", tp=tp)
    assert p.knob("attention_backend").value == "FLASH_ATTN" and p.page_tokens == 16
    assert p.extras["bytes_per_block"] == page * 80
    assert p.available_bytes == _vllm_available(p)
    assert p.extras["num_blocks"] == _vllm_available(p) // (page * 80)
    assert p.usable_pages == p.extras["num_blocks"] - 1  # block 0 is the null block
    assert p.startup_error is None
    assert "topk_indices_buffer_bytes" not in p.extras  # no DSA buffers without an indexer


@pytest.mark.parametrize(
    ("dtype", "block_bytes"),
    [
        # 1 head per rank (4 // 8 -> max 1): 16 × 1 × 256 × 2 = 8,192 B per layer × 94 = 770,048 B
        ("auto", 770_048),
        # fp8: 16 × 256 × 1 × 94 = 385,024 B
        ("fp8", 385_024),
    ],
)
def test_vllm_qwen3_235b_tp8(dtype: str, block_bytes: int) -> None:
    p = _plan("vllm", "qwen3-235b-a22b", tp=8, kv_cache_dtype=dtype)
    assert p.extras["bytes_per_block"] == block_bytes
    assert p.extras["num_blocks"] == _vllm_available(p) // block_bytes


def test_vllm_glm45_air_tp4_dp2() -> None:
    # attention TP 2: 4 kv heads per rank: 16 × 4 × 256 × 2 = 32,768 B per layer × 46 = 1,507,328 B per block
    p = _plan("vllm", "glm-4.5-air", tp=4, dp_attention=2)
    assert p.extras["bytes_per_block"] == 1_507_328


@pytest.mark.parametrize(
    ("dtype", "backend", "block", "row"),
    [
        # bf16: FLASH_ATTN_MLA, block 16: 16 × 1,152 × 61 = 1,124,352 B per block
        ("auto", "FLASH_ATTN_MLA", 16, 1152),
        # fp8: FLASHMLA (dense) first on SM90 with a quantized cache, kernel block 64, raw 576 B rows:
        # 64 × 576 × 61 = 2,248,704 B per block
        ("fp8", "FLASHMLA", 64, 576),
    ],
)
def test_vllm_deepseek_v3_no_indexer(dtype: str, backend: str, block: int, row: int) -> None:
    p = _plan("vllm", "deepseek-v3", tp=8, kv_cache_dtype=dtype)
    assert (p.knob("attention_backend").value, p.page_tokens, p.mla_bytes_per_layer) == (backend, block, row)
    assert p.extras["bytes_per_block"] == block * row * 61
    assert p.cell.indexer_bytes == 0 and "indexer_prefill_buffer_bytes" not in p.extras


def test_vllm_max_model_len_check_gqa() -> None:
    # the max-model-len check applies as for DSA: with 1 GiB of KV and 655,360 B per 16-token block (TP8),
    # 131,072 tokens need 8,192 blocks = 5.0 GiB > 1 GiB − one block: vLLM refuses to start
    p = _plan("vllm", "llama-3.1-70b", tp=8, kv_cache_memory="1GiB", context_length=131072)
    assert p.startup_error is not None and "max seq len (131072)" in p.startup_error


def test_mla_layout_refused_for_full_attention() -> None:
    with pytest.raises(PlanError, match="MLA models only"):
        _plan("sglang", "llama-3.1-8b", mla_layout="bf16")

"""The max-seq-len refusal as figures on the plan (``PoolPlan.startup_refusal``), beside vLLM's own words, and the
doctor reading those figures rather than the words.

vLLM 0.33.0 ``v1/core/kv_cache_utils.py check_enough_kv_cache_memory``: a start is refused when the blocks of one
max_model_len request need more than the KV cache memory left after the null block; V0 (0.6.4) ``worker.py
raise_if_cache_size_invalid`` compares tokens: max_model_len > block_size × num_gpu_blocks.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.runbook.doctor.startup import _refuses_at
from tests.conftest import make_plan
from tests.engines.test_vllm_v0 import LLAMA3, v0

VLLM = "glm-5.3-8xh200-vllm"
# GLM-5.3 on 8×H200 TP8, fp8 (fp8_ds_mla 656 B rows), block 64 (tests/engines/test_vllm.py::test_bytes_per_block):
# bytes_per_block = 64 × (656 × 78 + 132 × 21) = 3,452,160 B
BYTES_PER_BLOCK = 64 * (656 * 78 + 132 * 21)
# the KV budget the recipe's log reports (vllm-project/recipes PR #893, tests/data/logs/vllm-0.33.0-glm53-max-seq-len
# .log 'Available KV cache memory: 25.94 GiB'), as the doctor reads it back: 27,852,862,914 B
AVAILABLE = 27_852_862_914


def test_v1_refusal_carries_max_model_len_needed_and_available_bytes() -> None:
    p = make_plan(VLLM, context_length="1M", kv_cache_memory=f"{AVAILABLE}B")
    r = p.startup_refusal
    assert r is not None
    # one request of 1,048,576 tokens: cdiv(1,048,576, 64) = 16,384 blocks × 3,452,160 B = 56,560,189,440 B (52.68
    # GiB, the log's 'KV cache is needed' to its two decimals); available = the budget less the null block
    assert (r.max_model_len, r.needed_bytes, r.available_bytes) == (
        1_048_576,
        16_384 * BYTES_PER_BLOCK,
        AVAILABLE - BYTES_PER_BLOCK,
    )
    assert r.text == p.startup_error and "max seq len (1048576)" in r.text


def test_no_refusal_when_the_length_fits_and_none_for_other_errors() -> None:
    # 262,144 tokens: 4,096 blocks × 3,452,160 B = 14,140,047,360 B <= 27,849,410,754 B: it starts
    assert make_plan(VLLM, context_length=262_144, kv_cache_memory=f"{AVAILABLE}B").startup_refusal is None
    # above max_position_embeddings (1,048,576) vLLM refuses before any memory is profiled (config/model.py): an
    # error, but not the max-seq-len refusal
    p = make_plan(VLLM, context_length="2M", kv_cache_memory=f"{AVAILABLE}B")
    assert p.startup_error is not None and p.startup_refusal is None


def test_v0_refusal_counts_tokens_not_bytes() -> None:
    # Llama-3.1-8B bf16 on V0 0.6.4: 32 layers × 8 kv heads × (128 + 128) × 2 B = 131,072 B a token, 16-token blocks
    # of 2,097,152 B; kv_cache_memory 1 GiB: 512 blocks = 8,192 tokens < max_model_len 131,072 (the config's
    # max_position_embeddings)
    p = v0(LLAMA3, "0.6.4", "kv_cache_memory=1GiB")
    r = p.startup_refusal
    assert r is not None and (r.max_model_len, r.needed_bytes, r.available_bytes) == (131_072, None, None)
    assert r.text == p.startup_error and "(8192)" in r.text


def test_doctor_matches_the_refusal_by_its_max_model_len() -> None:
    p = make_plan(VLLM, context_length="1M", kv_cache_memory=f"{AVAILABLE}B")
    assert _refuses_at(p, 1_048_576) and not _refuses_at(p, 32_768)
    # any other start-up error refuses whatever the log's length (it names no max seq len)
    other = replace(p, startup_error="No available memory for the cache blocks.", startup_refusal=None)
    assert _refuses_at(other, 32_768)
    assert not _refuses_at(replace(p, startup_error=None, startup_refusal=None), 1_048_576)

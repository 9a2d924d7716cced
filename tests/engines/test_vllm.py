"""vLLM 0.33.0 goldens, derived from shared/reference/vllm-0.33.0.md §1-4 and §8."""

from __future__ import annotations

import math

from kvplan.engines.vllm import DEFAULT_NON_KV_OTHER, dsa_buffers
from kvplan.plan.admit import Request, admit
from kvplan.units import GiB, MiB, cdiv
from tests.conftest import make_plan

VLLM = "glm-5.3-8xh200-vllm"
# Reference §8 assumes torch total = 143,771 MiB, 88 GiB weights, 5 GiB of other non-KV memory in all and
# max_model_len 202,752. kvplan computes the DSA buffers itself, so "other" = 5 GiB − those buffers:
#   topk_indices_buffer = 8192 × 2048 × 4                           =    67,108,864
#   physical top-k      = 21 × ((1024 + 1) × 2048 × 4 + (1024 + 1) × 4) = 176,418,900
#   prefill buffer      = 202,752 × 8 × 5 × 132 (factor 5 at <= 256K) = 1,070,530,560
BUFFERS_202752 = 67_108_864 + 176_418_900 + 1_070_530_560
WORKED = {
    "gpu": "h200",
    "weights_per_gpu": "88GiB",
    "non_kv_other": f"{5 * GiB - BUFFERS_202752}B",
    "context_length": 202_752,
}


def worked(**sets: object):  # type: ignore[no-untyped-def]
    p = make_plan(VLLM, **{**WORKED, **sets})
    # the reference takes the NVML total as torch's total: rebuild the plan on that GPU
    from dataclasses import replace

    from kvplan.engines import plan_pool

    gpu = replace(p.deployment.gpu, cuda_total_bytes=143_771 * MiB)
    return plan_pool(p.arch, replace(p.deployment, gpu=gpu))


def test_bytes_per_block() -> None:
    # 64 × (656 × 78 + 132 × 21) = 3,274,752 + 177,408 = 3,452,160 B
    assert worked().extras["bytes_per_block"] == 3_452_160


def test_bytes_per_block_variants() -> None:
    # MTP joins the one group: 79 MLA + 22 indexer layers: 64 × (656 × 79 + 132 × 22) = 3,502,592
    assert worked(speculative_num_draft_tokens=1).extras["bytes_per_block"] == 3_502_592
    # H200 default dtype (auto = bf16): 64 × (1152 × 78 + 132 × 21) = 5,928,192
    assert worked(kv_cache_dtype="auto").extras["bytes_per_block"] == 5_928_192
    # B200: GlmMoeDsa sets fp8_e4m3 on SM10x -> FlashInfer sparse, raw 576 B: 64 × (576 × 78 + 2,772) = 3,052,800
    assert make_plan(VLLM, gpu="b200", kv_cache_dtype="auto").extras["bytes_per_block"] == 3_052_800


def test_dsa_buffers_match_reference() -> None:
    p = worked()
    b = dsa_buffers(p.arch, mnbt=8192, max_num_seqs=1024, spec=0, max_model_len=202_752, indexer_layers=21)
    assert sum(b.values()) == BUFFERS_202752
    # 8192 × 2048 × 4 B = 64 MiB, as the reference states
    assert b["topk_indices_buffer_bytes"] == 64 * MiB


def test_worked_example_blocks() -> None:
    # requested = ceil(150,754,820,096 × 0.92) = 138,694,434,489
    # available = 138,694,434,489 − 88 GiB − 5 GiB = 38,836,444,857
    # num_blocks = 38,836,444,857 // 3,452,160 = 11,249 (block 0 is the null block: 11,248 usable)
    p = worked()
    assert p.extras["requested_bytes"] == math.ceil(143_771 * MiB * 0.92) == 138_694_434_489
    assert p.available_bytes == 38_836_444_857
    assert p.extras["num_blocks"] == 11_249
    assert p.usable_pages == 11_248
    assert p.logged_tokens == 11_249 * 64 == 719_936
    assert p.startup_error is None
    # "GPU KV cache size" = int(11,249 / cdiv(202,752, 64) × 202,752) = int(11,249 / 3,168 × 202,752) = 719,936
    assert int(11_249 / cdiv(202_752, 64) * 202_752) == 719_936


def test_max_model_len_check_fails_with_vllm_text() -> None:
    # max_model_len 1,048,576 needs 3,452,160 × 16,384 = 56,560,189,440 B (52.68 GiB) > available − 1 block
    p = worked(context_length="1M")
    assert p.startup_error is not None
    assert p.startup_error.startswith(
        "To serve at least one request with the model's max seq len (1048576), (52.68 GiB"
    )


def test_recipe_893_calibration() -> None:
    # vllm-project/recipes PR #893: GLM-5.3 FP8 on 8×H200 TP8: 94.46 GiB weights per rank leave 25.94 GiB of KV.
    # kvplan's non-KV "other" default is calibrated on it: requested = ceil(143,156 MiB × 0.92) = 128.6167 GiB;
    # minus weights 94.46, DSA buffers at max_model_len 1M (64 MiB + 168.25 MiB + 2.0625 GiB) and 6,070 MiB
    # = 25.9397 GiB, which vLLM logs as "Available KV cache memory: 25.94 GiB". The recipe's H200 command sets no
    # --max-model-len, so vLLM takes the model's 1M (the preset ships 512K: test_preset_starts_at_512k).
    p = make_plan(VLLM, context_length="1M")
    assert p.knob("non_kv_other").value == DEFAULT_NON_KV_OTHER == 6_070 * MiB
    assert round(p.available_bytes / GiB, 2) == 25.94
    # num_blocks = 27,852,... // 3,452,160 = 8,068; 8,068 × 64 = 516,352 tokens: "about 516K"
    assert p.extras["num_blocks"] == 8_068
    assert p.logged_tokens == 516_352


def test_recipe_893_rejects_1m_and_the_remedy_admits() -> None:
    # 25.94 GiB holds 516,352 tokens, so a 1,048,576-token request cannot fit; with max_model_len 1M vLLM
    # does not even start. The smallest dcp that fits: dcp 2 gives 8,068 × 128 = 1,032,704 < 1,048,576,
    # dcp 4 gives 8,068 × 256 = 2,065,408 (a request needs cdiv(1M, 256) = 4,096 of the 8,067 usable blocks).
    p = make_plan(VLLM, context_length="1M")
    a = admit(p, Request(ctx_tokens=1 << 20))
    assert not a.admitted
    assert a.binding.name == "engine starts"
    dcp = {r.knob: r.value for r in a.remedies}["dcp"]
    assert dcp == 4
    fixed = make_plan(VLLM, dcp=dcp, context_length="1M")
    assert admit(fixed, Request(ctx_tokens=1 << 20)).admitted
    assert fixed.logged_tokens == 2_065_408


def test_kv_cache_memory_bypasses_utilization() -> None:
    # --kv-cache-memory-bytes 25.94GiB = 25.94 × 1,073,741,824 = 27,852,862,914 B -> // 3,452,160 = 8,068 blocks
    p = make_plan(VLLM, kv_cache_memory="25.94GiB", gpu_memory_utilization=0.5)
    assert p.available_bytes == 27_852_862_914
    assert p.extras["num_blocks"] == 8_068


def test_vllm_ignores_indexer_types() -> None:
    # vLLM reads index_topk_freq/offset only; GLM-5.3 carries freq 4 / offset 3, which gives the same 21 layers.
    p = make_plan(VLLM)
    assert p.indexer_layers == 21


def test_null_block_is_not_usable() -> None:
    # 8,068 blocks, block 0 is the null block: 8,067 × 64 = 516,288 tokens can be handed out, not 516,352
    p = make_plan(VLLM, context_length="256K")
    n = p.extras["num_blocks"]
    assert p.usable_pages == n - 1
    assert admit(p, Request(ctx_tokens=256 * 1024)).admitted
    assert admit(p, Request(ctx_tokens=64, concurrent=1), remedies=False).checks[2].ok
    full = Request(ctx_tokens=64 * 4, concurrent=(n - 1) // 4)
    over = Request(ctx_tokens=64 * 4, concurrent=(n - 1) // 4 + 1)
    assert admit(p, full, remedies=False).checks[2].ok
    assert not admit(p, over, remedies=False).checks[2].ok


def test_dcp8_shards_tokens_not_bytes() -> None:
    # vLLM DCP: every layer spec is dcp-sharded, so bytes per block stay 3,452,160 while one block id holds
    # 64 × 8 = 512 tokens of a request across the 8 ranks; the startup check uses cdiv(max_model_len, 8).
    p1, p8 = make_plan(VLLM, context_length="1M"), make_plan(VLLM, dcp=8, context_length="1M")
    assert p8.extras["bytes_per_block"] == p1.extras["bytes_per_block"] == 3_452_160
    assert p8.extras["num_blocks"] == p1.extras["num_blocks"] == 8_068
    assert p8.logged_tokens == 8_068 * 64 * 8 == 4_130_816
    # max_model_len 1,048,576 needs cdiv(cdiv(1,048,576, 8), 64) = 2,048 blocks × 3,452,160 B
    assert p8.extras["max_model_len_needed_bytes"] == 2_048 * 3_452_160
    assert p8.startup_error is None


def test_preset_starts_at_512k() -> None:
    # The preset ships max_model_len 524,288 (the recipe's own --max-model-len, its MI300X command): vLLM starts.
    # requested = ceil(150,109,945,856 × 0.92) = 138,101,150,188; non-KV = weights 101,425,652,695
    #   + top-k 8,192 × 2,048 × 4 = 67,108,864 + per-layer top-k 21 × (1,025 × 2,048 × 4 + 1,025 × 4) = 176,418,900
    #   + prefill 524,288 × 8 × 2 × 132 = 1,107,296,256 (factor 2 above 256K) + other 6,070 MiB = 6,364,856,320
    # available = 28,959,817,153 B (26.97 GiB) -> 8,388 blocks = 536,832 tokens;
    # check: 8,192 blocks × 3,452,160 = 28,280,094,720 <= 28,959,817,153 − 3,452,160 = 28,956,364,993
    p = make_plan(VLLM)
    assert p.context_len == 524_288 and p.startup_error is None
    assert p.available_bytes == 28_959_817_153
    assert p.extras["num_blocks"] == 8_388 and p.logged_tokens == 536_832
    assert p.extras["max_model_len_needed_bytes"] == 8_192 * 3_452_160 == 28_280_094_720
    # one full-length request is admitted: cdiv(524,288, 64) = 8,192 of the 8,387 usable blocks
    assert admit(p, Request(ctx_tokens=524_288)).admitted

"""The nine mutants of issue 26 that survived the suite, each pinned at its boundary.

Every expected figure is derived in its comment from the engine's source (file and function) or from
shared/reference/ (sglang-0.5.23.md, vllm-0.33.0.md), never by re-running kvplan's own expression. Sizes
are set explicitly (pre-load free, weights, memory fraction, --kv-cache-memory) where the derivation would
otherwise run through kvplan's estimates, so that the arithmetic below is the engine's and nothing else.
"""

from __future__ import annotations

import pytest

from kvplan.engines.common import PoolPlan
from kvplan.models.cache import CompressedAttention, IndexerK, kv_dtype_bytes
from kvplan.plan.admit import Request, admit
from kvplan.plan.prefix import prefix_hit, reusable
from tests.conftest import make_plan
from tests.engines.test_engine_versions_sglang import LLAMA, _plan

GiB = 1 << 30
VLLM = "glm-5.3-8xh200-vllm"


def _term(p: PoolPlan, label: str) -> int:
    t = next(t for t in p.chain if t.label == label)
    assert t.bytes is not None
    return t.bytes


# ---------------------------------------------------------------- 1. fp16 spelled both ways is 2 bytes


@pytest.mark.parametrize("dtype", ["fp16", "float16", "half", "bfloat16", "bf16"])
def test_sixteen_bit_kv_dtypes_are_two_bytes_however_spelled(dtype: str) -> None:
    # SGLang --kv-cache-dtype float16 / bfloat16 (server_args choices) -> torch.float16 / torch.bfloat16,
    # torch._utils._element_size = 2; vLLM STR_DTYPE_TO_TORCH_DTYPE["half"|"float16"|"bfloat16"] likewise 2
    assert kv_dtype_bytes(dtype) == 2


@pytest.mark.parametrize("dtype", ["fp16", "float16"])
def test_llama_8b_fp16_pool_on_sglang(dtype: str) -> None:
    # MHATokenToKVPool (sglang mem_cache/memory_pool.py): k_buffer + v_buffer per layer of
    # [size + page, head_num, head_dim] in the KV dtype: 2 × 8 kv heads × 128 × 2 B × 32 layers = 131,072 B
    # a token (a 1-byte float16 would give 65,536 B and twice the pool).
    # profile_max_num_token: rest = pre-load free − weights − pre-load free × (1 − mem_fraction_static)
    #   = 140 − 15 − 14 GiB = 111 GiB = 119,185,342,464 B; // 131,072 = 909,312 rows (a whole number of
    #   64-token pages: 909,312 = 14,208 × 64)
    p = make_plan(
        model="llama-3.1-8b",
        tp=1,
        kv_cache_dtype=dtype,
        pre_load_free="140GiB",
        weights_per_gpu="15GiB",
        mem_fraction_static=0.9,
    )
    assert p.cell.total_bytes == 131_072
    assert p.available_bytes == 111 * GiB
    assert p.logged_tokens == 909_312


# ---------------------------------------------------------------- 2. the prefix hit's L − 1 and EAGLE's P − 1


@pytest.mark.parametrize(
    ("ctx", "hit", "expected"),
    [
        # vLLM KVCacheManager.get_computed_blocks: max_cache_hit_length = request.num_tokens − 1 (the last token
        # is recomputed for its logits), then whole 64-token blocks (BlockPool hashes full blocks only)
        (1024, 1024, 960),  # min(1024, 1023) = 1023 -> 15 blocks = 960 (without the − 1: 1024)
        (1025, 1025, 1024),  # min(1025, 1024) = 1024 -> 16 blocks (a cap of L − 2 would give 960)
        (2048, 1024, 1024),  # the hit itself binds: 1024 -> 16 blocks
    ],
)
def test_vllm_hit_is_capped_at_l_minus_1(ctx: int, hit: int, expected: int) -> None:
    p = make_plan(VLLM, context_length="128K")
    assert reusable(p, ctx, hit)[0] == expected


@pytest.mark.parametrize(
    ("eagle", "ctx", "hit", "expected"),
    [
        # SGLang RadixCache.match_prefix with page_size 64: the key is cut to whole pages; the scheduler matches at
        # most len(input) − 1 tokens (schedule_batch.Req.init_next_round_input: max_prefix_len = input_len − 1)
        (False, 2048, 1024, 1024),  # 1024 whole -> 16 pages
        (False, 1024, 1024, 960),  # capped at L − 1 = 1023 -> 15 pages
        # EAGLE: the radix key is the bigram view (RadixKey ... is_bigram), P tokens give P − 1 units
        (True, 2048, 1024, 960),  # 1023 units -> 15 pages (without the − 1: 1024)
        (True, 2048, 1025, 1024),  # 1024 units -> 16 pages (a − 2 would give 960)
    ],
)
def test_sglang_hit_eagle_bigram(eagle: bool, ctx: int, hit: int, expected: int) -> None:
    p = make_plan(context_length="128K")
    assert reusable(p, ctx, hit, eagle=eagle)[0] == expected


# ---------------------------------------------------------------- 3. vLLM's indexer layers + MTP


def test_vllm_mtp_layer_has_its_own_physical_topk() -> None:
    # vllm v1/attention/backends/mla/index_group.py: each indexer layer holds physical_topk_indices
    # (rows + 1) × index_topk int32 plus valid_topk_counts (rows + 1) int32, with
    # rows = min(max_num_batched_tokens, max_num_seqs × (1 + num_spec_tokens)) (reference §6). GLM-5.3: 21
    # indexer layers + the MTP module's own (nvidia/mtp.py) = 22. H200 under `vllm serve`: 8,192 and 1,024.
    # 3 draft tokens: rows = min(8,192, 1,024 × 4) = 4,096 -> 4,097 × (2,048 × 4 + 4) = 4,097 × 8,196
    #   = 33,579,012 B a layer × 22 = 738,738,264 B  (with 20 layers, the "− mtp" mutant: 671,580,240)
    three = make_plan(VLLM, speculative_num_draft_tokens=3)
    assert _term(three, "physical topk") == 738_738_264
    # 1 draft token: rows = 2,048 -> 2,049 × 8,196 × 22 = 369,459,288 B
    one = make_plan(VLLM, speculative_num_draft_tokens=1)
    assert _term(one, "physical topk") == 369_459_288
    # the buffers are non-KV (built during model construction), so the KV budget falls by the difference:
    # 738,738,264 − 369,459,288 = 369,278,976 B (every other term is the same at 1 and 3 draft tokens)
    assert _term(one, "available KV cache memory") - _term(three, "available KV cache memory") == 369_278_976


# ---------------------------------------------------------------- 4. what a main-KV-only plan would have claimed


def test_vllm_main_only_claim_keeps_the_null_block() -> None:
    # --kv-cache-memory 30 GiB = 32,212,254,720 B. Main MLA KV only (fp8_ds_mla 656 B × 78 layers = 51,168 B a
    # token, no indexer): 32,212,254,720 // 51,168 = 629,539 -> whole 64-token blocks: 9,836 blocks = 629,504
    # rows; vLLM's BlockPool takes block 0 as the null block (v1/core/block_pool.py), so 9,835 blocks hold
    # requests: 629,440 tokens.
    p = make_plan(VLLM, kv_cache_memory="30GiB", context_length="1M")
    at_edge = admit(p, Request(ctx_tokens=629_440), remedies=False)
    assert at_edge.main_only.cell_bytes == 51_168
    assert at_edge.main_only.pool_tokens == 629_504
    assert at_edge.main_only.admitted  # 9,835 blocks of 9,835
    past = admit(p, Request(ctx_tokens=629_441), remedies=False)
    assert not past.main_only.admitted  # 9,836 blocks: one more than the pool gives
    # the real pool: + 132 B × 21 indexer layers = 53,940 B: 32,212,254,720 // (64 × 53,940) = 9,331 blocks,
    # 9,330 usable = 597,120 tokens: 1M does not start (get_kv_cache_configs' max_model_len check)
    assert p.usable_tokens == 597_120 and at_edge.main_only.largest_ctx == 0


def test_main_only_largest_context_is_the_smaller_of_context_and_pool() -> None:
    # SGLang GLM-5.3 8×H200 (preset): 140 − 15 − 14 GiB with pinned sizes = 111 GiB = 119,185,342,464 B;
    # main only: // 51,168 = 2,329,294 rows -> // 64 × 64 = 2,329,280 (SGLang has no null page)
    p = make_plan(pre_load_free="140GiB", weights_per_gpu="15GiB", mem_fraction_static=0.9, context_length="1M")
    a = admit(p, Request(ctx_tokens=1 << 20), remedies=False)
    assert (a.main_only.pool_tokens, a.main_only.largest_ctx) == (2_329_280, 1 << 20)  # context binds
    small = make_plan(pre_load_free="140GiB", weights_per_gpu="120GiB", mem_fraction_static=0.9)
    # 140 − 120 − 14 GiB = 6 GiB = 6,442,450,944 B // 51,168 = 125,907 -> 125,888 rows: the pool binds
    b = admit(small, Request(ctx_tokens=1 << 20), remedies=False)
    assert (b.main_only.pool_tokens, b.main_only.largest_ctx) == (125_888, 125_888)


# ---------------------------------------------------------------- 5. the tightest check is a ratio


def test_tightest_check_is_the_least_relative_headroom() -> None:
    # 2 × 250,000 tokens on vLLM GLM-5.3 8×H200 (max_model_len 524,288, 8,388 blocks, 8,387 usable):
    # context: (524,288 − 250,000) / 524,288 = 0.52 of headroom; pool: 2 × cdiv(250,000, 64) = 2 × 3,907
    # = 7,814 of 8,387 blocks: 573 / 8,387 = 0.068; running requests: 1,022 / 1,024. The pool is the tightest
    # (a floor division would make every ratio 0 and name the first, the context length).
    a = admit(make_plan(VLLM), Request(ctx_tokens=250_000, concurrent=2), remedies=False)
    pool = next(c for c in a.checks if c.name == "pool pages")
    assert (pool.need, pool.have) == (7_814, 8_387)
    assert a.admitted and a.binding.name == "pool pages"


# ---------------------------------------------------------------- 6. vLLM's max_num_seqs rows


@pytest.mark.parametrize(
    ("gpu", "mnbt", "seqs"),
    [
        # vllm engine/arg_utils.py (reference §6 table), `vllm serve`:
        ("b200", 16_384, 1_024),  # 183,359 MiB NVML, 178.3 GiB to CUDA: >= 160 GiB
        ("h200", 8_192, 1_024),  # 139.8 GiB: >= 70 GiB, not A100
        ("a100-80gb", 2_048, 256),  # 79.2 GiB but an A100: the small row
        ("l40s", 2_048, 256),  # 44.4 GiB: under 70 GiB
    ],
)
def test_vllm_defaults_by_device_memory(gpu: str, mnbt: int, seqs: int) -> None:
    p = make_plan(VLLM, model="llama-3.1-8b", tp=1, gpu=gpu, context_length=8192)
    assert p.max_running_requests == seqs
    assert p.knob("max_num_batched_tokens").value == mnbt


# ---------------------------------------------------------------- 7. × dcp in vLLM's estimated max length


def test_vllm_estimated_max_model_len_counts_dcp() -> None:
    # dcp 2, --kv-cache-memory 16 GiB = 17,179,869,184 B; a 64-token block of 53,940 B rows = 3,452,160 B:
    # 4,976 blocks, the null block first: check = 4,975 blocks = 17,174,496,000 B (15.99 GiB, vLLM's
    # format_gib rounds it to 16.0). max_model_len 1M needs cdiv(cdiv(1,048,576, dcp 2), 64) = 8,192 blocks
    # = 28,280,094,720 B = 26.34 GiB (FullAttentionSpec.max_memory_usage_bytes divides the length by dcp):
    # refused. estimate_max_model_len: the longest length whose cdiv(len / 2, 64) blocks fit: 4,975 × 64 × 2
    # = 636,800 (without × dcp: 318,400).
    p = make_plan(VLLM, dcp=2, kv_cache_memory="16GiB", context_length="1M")
    assert p.startup_error is not None
    assert "max seq len (1048576), (26.34 GiB KV cache is needed" in p.startup_error
    assert "available KV cache memory (16.0 GiB)" in p.startup_error
    assert "the estimated maximum model length is 636800." in p.startup_error


# ---------------------------------------------------------------- 8. page sizes forced by the backend


@pytest.mark.parametrize(
    ("backend", "block", "usable_blocks"),
    [
        # vllm v1/attention/backends/mla/flashinfer_mla.py get_supported_kernel_block_sizes -> [32, 64]; the
        # smallest is taken when --block-size is not given (Platform.update_block_size_for_backend)
        ("FLASHINFER_MLA", 32, 15_278),
        # cutlass_mla.py -> [128]
        ("CUTLASS_MLA", 128, 3_818),
    ],
)
def test_vllm_mla_backend_block_size(backend: str, block: int, usable_blocks: int) -> None:
    # DeepSeek-V3 fp8 MLA: (512 + 64) × 1 B × 61 layers = 35,136 B a token. 16 GiB = 17,179,869,184 B:
    #   block 32: // (32 × 35,136 = 1,124,352) = 15,279 blocks, 15,278 after the null block
    #   block 128: // 4,497,408 = 3,819 blocks, 3,818 usable
    p = make_plan(VLLM, model="deepseek-v3", gpu="b200", context_length="128K", attention_backend=backend,
                  kv_cache_memory="16GiB")  # fmt: skip
    assert p.cell.total_bytes == 35_136
    assert (p.page_tokens, p.usable_pages) == (block, usable_blocks)


@pytest.mark.parametrize(
    ("backend", "page", "rows"),
    [
        # sglang server_args.py (_handle_attention_backend_compatibility): cutlass_mla sets page_size 128,
        # trtllm_mla 64 (unless 32 was asked), flashinfer keeps the default 1
        ("cutlass_mla", 128, 1_298_688),
        ("trtllm_mla", 64, 1_298_752),
        ("flashinfer", 1, 1_298_782),
    ],
)
def test_sglang_mla_backend_page_size(backend: str, page: int, rows: int) -> None:
    # DeepSeek-V3 bf16 MLA: 576 × 2 B × 61 layers = 70,272 B a row. rest = 140 − 41 − 14 GiB = 85 GiB
    # = 91,268,055,040 B // 70,272 = 1,298,782 rows, then // page × page
    p = make_plan(model="deepseek-v3", gpu="b200", page_size="default", attention_backend=backend,
                  kv_cache_dtype="auto", mla_layout="default", context_length="128K", pre_load_free="140GiB",
                  weights_per_gpu="41GiB", mem_fraction_static=0.9)  # fmt: skip
    assert p.cell.total_bytes == 70_272
    assert (p.page_tokens, p.rows) == (page, rows)


# ---------------------------------------------------------------- 9. SGLang 0.5.3 / 0.5.5 graphs under 35 GiB


@pytest.mark.parametrize(
    ("version", "tp", "max_bs", "reserved_mib"),
    [
        # ServerArgs._handle_gpu_memory_settings of 0.5.3 / 0.5.5 on an L4 (23,034 MiB < 35 GiB): chunk 2048,
        # cuda_graph_max_bs 16 (0.5.3) / 24 (0.5.5) at tp < 4, else 80. The reserve (0.5.3+):
        # 512 + max(chunk, 2048) × 1.5 + max_bs × 2 + tp × 128 MiB
        ("0.5.3", 2, 16, 512 + 3072 + 32 + 256),  # 3,872
        ("0.5.3", 4, 80, 512 + 3072 + 160 + 512),  # 4,256: tp 4 is past the boundary
        ("0.5.5", 2, 24, 512 + 3072 + 48 + 256),  # 3,888
        ("0.5.5", 4, 80, 512 + 3072 + 160 + 512),  # 4,256
    ],
)
def test_sglang_graph_batch_at_the_tp_4_boundary(version: str, tp: int, max_bs: int, reserved_mib: int) -> None:
    p = _plan(LLAMA, version, "l4", "weights_per_gpu=4GiB", "pre_load_free=21GiB", tp=tp)
    assert p.knob("cuda_graph_max_bs").value == max_bs
    assert p.extras["mem_fraction_reserved_mib"] == reserved_mib


# ---------------------------------------------------------------- prefix economics read whole


def test_prefix_pairs_and_parts_per_million() -> None:
    # 2,048-token request, 1,024-token hit on SGLang (64-token pages): R = 1,024 reused, S = 1,024 suffix.
    # Causal attention pairs: all = 2,048 × 2,049 / 2 = 2,098,176; saved = 1,024 × 1,025 / 2 = 524,800; still
    # paid = S × R + S(S + 1)/2 = 1,048,576 + 524,800 = 1,573,376 (= all − saved)
    h = prefix_hit(make_plan(context_length="128K"), 2048, 1024)
    assert (h.pairs_total, h.pairs_saved, h.pairs_paid) == (2_098_176, 524_800, 1_573_376)
    # parts per million, floored: saved 524,800 × 10^6 // 2,098,176 = 250,122 (25.01 %); the naive figure
    # 1,024 × 10^6 // 2,048 = 500,000 (50 %)
    assert (h.saved_ppm, h.naive_ppm) == (250_122, 500_000)


def test_a_hit_shorter_than_a_page_reuses_nothing() -> None:
    # 63 tokens < one 64-token page: RadixCache matches whole pages only -> 0 (never negative: EAGLE's P − 1 of a
    # 0-token hit is −1 units, still 0 pages)
    p = make_plan(context_length="128K")
    assert reusable(p, 2048, 63)[0] == 0
    assert reusable(p, 2048, 0, eagle=True)[0] == 0


def test_prefix_bounds_are_inclusive() -> None:
    # the smallest request (1 token), a hit as long as the request (the engine still recomputes the last token:
    # 1,024 -> L − 1 = 1,023 -> 960), and a 1-token chunk (one chunk per suffix token) are all valid questions
    p = make_plan(context_length="128K")
    assert prefix_hit(p, 1, 0).reusable_tokens == 0
    whole = prefix_hit(p, 1024, 1024)
    assert (whole.reusable_tokens, whole.suffix_tokens) == (960, 64)
    assert prefix_hit(p, 2048, 1024, chunk=1).suffix_chunks == 1024


@pytest.mark.parametrize(
    ("dtype", "size"), [("float32", 4), ("fp8", 1), ("fp8_e4m3", 1), ("fp8_e5m2", 1), ("fp8_ds_mla", 1)]
)
def test_other_kv_dtype_sizes(dtype: str, size: int) -> None:
    # torch element sizes: float32 4 B (vLLM's auto under --dtype float32), the fp8 formats 1 B (vLLM's
    # fp8_ds_mla cache is a uint8 tensor: its 656 B rows are counted in bytes)
    assert kv_dtype_bytes(dtype) == size


def test_v4_indexer_keys_per_request() -> None:
    # DeepSeek-V4's C4 indexer keeps one key per 4 tokens: 131,072 // 4 = 32,768 keys × 132 B (128 fp8 + a 4 B
    # fp32 scale, DeepseekV4IndexerCache) = 4,325,376 B
    assert IndexerK(128, compress_ratio=4).bytes_per_request(131_072) == 4_325_376
    assert IndexerK(128, compress_ratio=4).bytes_per_request(3) == 0  # no whole group yet
    assert IndexerK(128).bytes_per_request(0) == 0  # DSA: one key a token, none for no token


def test_v4_compressed_entry_bytes() -> None:
    # DeepSeek-V4's fp8 cache entry (vllm models/deepseek_v4 sparse_mla / DeepseekV4MLAAttention, 584 B): 448 nope
    # dims in fp8 + 64 rope dims in bf16 (128 B) + one fp32-exponent byte per 64 nope dims (7) + 1 pad = 584
    assert CompressedAttention(head_dim=512, qk_rope_head_dim=64, window=128, compress_ratio=0).entry_bytes == 584

"""The workspace walls read at the model's limit (issue 26: the context wall's "breaks" reason).

Qwen3-Next-80B-A3B on vLLM 0.33.0 (8×H200, TP8): the hybrid block pool's attention block is 320 tokens
(``_align_hybrid_block_size``: one attention page grows until it holds a Gated DeltaNet state), and the model's
max_position_embeddings 262,144 is not a whole number of them (819.2 blocks). A request of t tokens takes
cdiv(t, 320) blocks of the full-attention group plus 9 state blocks (3 GDN groups × 3 in mamba_cache_mode
'align': MambaSpec, KVCacheCoordinator: every group allocates from the one pool):
262,080 tokens (819 blocks) take 828, 262,144 take 820 + 9 = 829.
"""

from __future__ import annotations

import pytest

from kvplan.engines.common import PoolPlan
from kvplan.plan.workspace import Item, Wall, WorkspaceQuery, sglang_prefill_chunking, walls, workspace
from tests.conftest import make_plan

QWEN = {"model": "qwen3-next-80b-a3b", "context_length": "128K", "page_size": "default"}


def _context_wall(**sets: object) -> Wall:
    p = make_plan("glm-5.3-8xh200-vllm", **QWEN, **sets)
    return next(w for w in walls(p, WorkspaceQuery(batch=1, ctx=None)) if w.knob == "context")


def test_context_wall_breaks_at_the_limit_when_it_is_not_a_whole_block() -> None:
    # --num-gpu-blocks-override 829: block 0 is the null block, 828 hold requests. 262,080 tokens (828 blocks)
    # fit; 262,144 (829) do not, and vLLM refuses to start with max_model_len 262,144 (get_kv_cache_configs'
    # check): the wall is 262,080 and what breaks is the engine start. It was reported as "nothing up to
    # 262,144" because the next whole block, 262,400, is past the limit and was never tried.
    w = _context_wall(num_gpu_blocks_override=829)
    assert (w.largest_fitting, w.breaks, w.limit) == (262_080, "engine starts", 262_144)


def test_context_wall_reaches_the_limit_when_it_fits() -> None:
    # 830 blocks, 829 usable: 262,144 tokens fit, so the largest context is the model's own limit (it was
    # reported as 262,080, a block short, with nothing breaking)
    w = _context_wall(num_gpu_blocks_override=830)
    assert (w.largest_fitting, w.breaks) == (262_144, "")


def test_default_context_of_a_crowded_hybrid_is_the_pages_that_fit() -> None:
    # 56,462 blocks (56,461 after the null block). A request of n whole blocks of 320 tokens takes n + 9 blocks:
    #   5,200 requests: 1 block each takes 5,200 × 10 = 52,000 <= 56,461; 2 blocks 5,200 × 11 = 57,200 do not fit
    #   -> the default context is one block, 320 tokens (not the context length: nothing longer fits)
    #   5,132 requests: 5,132 × 11 = 56,452 fit, 5,132 × 12 = 61,584 do not -> 640 tokens
    p = make_plan("glm-5.3-8xh200-vllm", **QWEN, num_gpu_blocks_override=56_462)
    assert workspace(p, WorkspaceQuery(batch=5_200)).ctx == 320
    assert workspace(p, WorkspaceQuery(batch=5_132)).ctx == 640


def test_dcp_plan_reserves_no_prefill_graph_and_scores_one_chunk() -> None:
    # GLM-5.3 on 8×H200, SGLang, dcp 8: arg_groups/cuda_graph_hook.py (reference §2.6) turns the prefill graph off
    # for dcp_size > 1, so reserve_for_graph_mb keeps only the decode graph: max_bs 512 (tp >= 4, < 160 GiB) × 2 MiB
    # = 1,073,741,824 B, no MLA 1,536 MiB. 4,096 query rows × 4,096 keys × 4 B = 67,108,864 B: over the 8,000,000
    # elements that ask for the budget (mqa_logits_utils), under the ~3.4 GB budget, so _get_topk_ragged scores it
    # in one chunk
    w = workspace(make_plan("glm-5.3-8xh200-sglang", dcp=8), WorkspaceQuery(batch=1, ctx=4096, chunk=4096))
    items = {i.name: i for i in w.items}
    graphs = items["CUDA graphs (estimate)"]
    assert (graphs.bytes, graphs.detail) == (1_073_741_824, "SGLang's own reserve: decode max_bs 512 × 2 MiB")
    logits = items["prefill logits"]
    assert (logits.bytes, logits.detail) == (67_108_864, "4,096 rows × 4,096 keys × 4 B, one chunk")
    # the top-k indices are int32: 4,096 prefill rows × index_topk 2,048 × 4 B; one decode row × 2,048 × 4 B
    assert (items["prefill top-k indices"].bytes, items["decode top-k indices"].bytes) == (33_554_432, 8_192)


def test_vllm_block_table_and_prefill_logits_of_a_short_request() -> None:
    # GLM-5.3 on 8×H200, vLLM 0.33.0: v1/worker/block_table.py BlockTable holds max_num_reqs 1,024 × cdiv(
    # max_model_len 524,288, block 64) = 8,192 int32 ids: 33,554,432 B. A 4,096-token request prefills at most
    # 4,096 query rows (the chunk, 8,192 batched tokens, is longer than the request) against 4,096 keys; the
    # VLLM_SPARSE_INDEXER_MAX_LOGITS_MB 512 cap allows 512 MiB // (4,096 × 4 B) = 32,768 rows a chunk, so one
    # chunk of 4,096 × 4,096 × 4 B = 67,108,864 B
    p = make_plan("glm-5.3-8xh200-vllm")
    assert (p.max_running_requests, p.context_len, p.extras["max_num_batched_tokens"]) == (1024, 524_288, 8192)
    items = {i.name: i for i in workspace(p, WorkspaceQuery(batch=1, ctx=4096)).items}
    assert items["block table"].bytes == 33_554_432
    logits = items["prefill logits"]
    assert logits.bytes == 67_108_864
    assert logits.detail == "capped at 512 MiB: 32,768 rows of 4,096 keys a chunk, 1 chunks for 4,096 rows"


def test_a_capped_pool_allocates_nothing_past_the_slack() -> None:
    # --max-total-tokens 100,000 caps Llama-3.1-8B's pool far below what the budget holds (model_runner: the
    # profiled size is min()'d with max_total_tokens), so no padding row or page lands outside the budget: 0 B
    p = make_plan("glm-5.3-8xh200-sglang", model="llama-3.1-8b", max_total_tokens=100_000)
    assert p.allocated_bytes < p.available_bytes
    padding = next(i for i in workspace(p, WorkspaceQuery(batch=1)).items if i.name == "pool padding")
    assert padding.bytes == 0


@pytest.mark.parametrize("running", [1 << 21, 1 << 20])
def test_the_batch_wall_stops_at_2_to_the_20_requests(running: int) -> None:
    # walls() grows the batch up to 1 << 20 = 1,048,576 requests. Llama-3.1-8B fp8 at tp 8 on H200 holds ~16M
    # one-token pages: with max_running_requests 2,097,152 or exactly 1,048,576, 1,048,576 requests of 1 token
    # fit, so the wall is the search's own limit with nothing breaking within it (what would break one request
    # past the limit, the running-request cap at 1 << 20, is outside the range searched)
    p = make_plan(
        "glm-5.3-8xh200-sglang",
        model="llama-3.1-8b",
        kv_cache_dtype="fp8_e4m3",
        context_length=64,
        max_running_requests=running,
        page_size=1,
    )
    assert p.rows > 1 << 20
    w = next(w for w in walls(p, WorkspaceQuery(batch=1, ctx=1)) if w.knob == "batch")
    assert (w.largest_fitting, w.breaks, w.limit) == (1_048_576, "", 1_048_576)


def test_the_logits_budget_is_asked_from_8_000_000_elements() -> None:
    # mqa_logits_utils: below MQA_LOGITS_STATIC_SKIP_ELEMS (8,000,000 rows × keys) _get_topk_ragged scores the whole
    # prefill at once; at 2,000 × 4,000 = 8,000,000 it checks the budget: 32,000,000 B over 16,000,000 ->
    # 16,000,000 // (4,000 × 4) = 1,000 rows a chunk, 2 chunks; 1,999 rows (7,996,000) are one chunk over budget
    at = sglang_prefill_chunking(2000, 4000, 16_000_000)
    assert (at.checked, at.rows_per_chunk, at.chunks) == (True, 1000, 2)
    below = sglang_prefill_chunking(1999, 4000, 16_000_000)
    assert (below.checked, below.rows_per_chunk, below.chunks) == (False, 1999, 1)
    # one element under: 1 × 7,999,999 is not checked either
    assert not sglang_prefill_chunking(1, 7_999_999, 16_000_000).checked


def test_a_vllm_model_without_indexer_reserves_its_block_table_only() -> None:
    # Llama-3.1-8B on vLLM 0.33.0: no DSA buffers and no indexer logits cap; the block table, 1,024 requests ×
    # cdiv(131,072, 16) = 8,192 int32 ids = 33,554,432 B, is built with the model (counted in its non-KV memory),
    # so the room vLLM reserved is exactly it: 0 B left
    p = make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", context_length=131072)
    w = workspace(p, WorkspaceQuery(batch=1))
    assert [(i.name, i.bytes) for i in w.items] == [("block table", 33_554_432)]
    assert (w.room_bytes, w.left_bytes, w.fits) == (33_554_432, 0, True)


def test_a_query_past_the_last_whole_block_still_tops_out_at_the_limit() -> None:
    # 830 blocks, 829 usable (the docstring's arithmetic): a query of 262,100 tokens takes cdiv(262,100, 320) = 820
    # blocks + 9, which fits; the first whole block at or above it, 820 × 320 = 262,400, is past the 262,144
    # positions, so the search has no whole block to try and the wall is the model's limit itself, 262,144 (which
    # fits: 820 + 9 = 829 blocks), never a block past it
    p = make_plan("glm-5.3-8xh200-vllm", **QWEN, num_gpu_blocks_override=830)
    w = next(w for w in walls(p, WorkspaceQuery(batch=1, ctx=262_100)) if w.knob == "context")
    assert (w.largest_fitting, w.breaks, w.limit) == (262_144, "", 262_144)


def test_an_overfull_slack_names_its_biggest_item() -> None:
    # max_running_requests 2,097,152 at a context of 131,072 on SGLang: ReqToTokenPool is (2,097,152 + 1) rows ×
    # (131,072 + extra) int32 ≈ 1.1 TB against a ~16 GB slack (pre-load free × (1 − mem_fraction_static)); the
    # query's own values do not fit, and what breaks is the largest item, req_to_token, not the pool padding
    p = make_plan("glm-5.3-8xh200-sglang", model="llama-3.1-8b", context_length=131072, max_running_requests=1 << 21)
    assert p.extras["req_to_token_bytes"] > 1_000_000_000_000 > 20_000_000_000 > p.extras["slack_bytes"]
    for w in walls(p, WorkspaceQuery(batch=1)):
        assert (w.largest_fitting, w.breaks, w.limit) == (-1, "workspace (req_to_token)", 0)


def test_a_budget_under_one_row_scores_one_row_a_chunk() -> None:
    # fresh seed 20371. SGLang _get_topk_ragged: max_rows = max(1, budget // (cols × 4)): 2,000 rows of 4,096 keys
    # (8,192,000 elements, past the 8,000,000 the check starts at) against 10,000 B, under one row's 16,384 B:
    # 1 row a chunk, 2,000 chunks
    c = sglang_prefill_chunking(2_000, 4_096, 10_000)
    assert (c.rows_per_chunk, c.chunks) == (1, 2_000)


def test_a_batch_of_exactly_the_running_cap_fits() -> None:
    # the scheduler runs at most max_running_requests at once: a batch of exactly that many one-page requests fits,
    # one more does not
    p = make_plan("glm-5.3-8xh200-sglang", model="llama-3.1-8b")
    cap = p.max_running_requests
    assert workspace(p, WorkspaceQuery(batch=cap, ctx=16)).pool_fits
    assert not workspace(p, WorkspaceQuery(batch=cap + 1, ctx=16)).pool_fits


def test_a_mamba_hybrids_padding_is_one_row_past_its_kv_bytes() -> None:
    # Qwen3-Next at tp 8, page 1: a row is 12 full-attention layers × 1 kv head a rank × 256 × (K + V) × 2 B =
    # 12,288 B. The Mamba state pool comes out of the memory first; the KV pool takes available // 12,288 rows and
    # allocates one more (the padding slot of a 1-token page), so what lands past the available bytes is
    # 12,288 − (available mod 12,288), never the state pool's bytes
    p = make_plan("glm-5.3-8xh200-sglang", model="qwen3-next-80b-a3b", kv_cache_dtype="auto", page_size=1)
    assert p.cell.total_bytes == 12_288 and p.extras["mamba_alloc_bytes"] > 0
    padding = next(i for i in workspace(p, WorkspaceQuery(batch=1)).items if i.name == "pool padding")
    assert padding.bytes == 12_288 - p.available_bytes % 12_288


def test_a_uniform_pools_padding_is_one_row_past_its_kv_bytes() -> None:
    # Llama-3.1-8B bf16 at tp 8, page 1: a row is 32 layers × 1 kv head a rank × 128 × (K + V) × 2 B = 16,384 B; the
    # pool takes available // 16,384 rows and allocates one more (the padding slot), so exactly 16,384 − (available
    # mod 16,384) lands past the available bytes (no state pool to leave out)
    p = make_plan("glm-5.3-8xh200-sglang", model="llama-3.1-8b", kv_cache_dtype="auto", page_size=1)
    assert p.cell.total_bytes == 16_384 and "mamba_alloc_bytes" not in p.extras
    padding = next(i for i in workspace(p, WorkspaceQuery(batch=1)).items if i.name == "pool padding")
    assert padding.bytes == 16_384 - p.available_bytes % 16_384


def test_vllm_reserves_the_indexer_logits_cap_beside_its_buffers() -> None:
    # fresh seed 30158. GLM-5.3 on vLLM 0.33.0: the persistent DSA buffers (topk_indices_buffer, the per-layer
    # top-k, the indexer prefill buffer, the block table) are built with the model, and each prefill logits tensor
    # is capped at VLLM_SPARSE_INDEXER_MAX_LOGITS_MB 512 (vllm/envs.py): the room is those buffers plus
    # 512 × 1,048,576 = 536,870,912 B. Without an indexer there is no cap to reserve (the Llama test above: 0 B)
    w = workspace(make_plan("glm-5.3-8xh200-vllm"), WorkspaceQuery(batch=1, ctx=4096))
    assert w.room_bytes - w.persistent_bytes == 536_870_912


def test_vllm_mtp_doubles_the_topk_indices_buffer_and_says_so() -> None:
    # fresh seed 30158. vLLM builds topk_indices_buffer (max_num_batched_tokens × index_topk int32) in the target
    # model and again in the MTP draft model: 8,192 × 2,048 × 4 B × 2 = 134,217,728 B, and the line names the copy
    p = make_plan("glm-5.3-8xh200-vllm", speculative_num_draft_tokens=3)
    buf = next(i for i in workspace(p, WorkspaceQuery(batch=1, ctx=4096)).items if i.name == "topk_indices_buffer")
    assert (buf.bytes, buf.detail) == (134_217_728, "8,192 × 2,048 × 4 B × 2 (MTP copy)")


def test_default_context_when_the_batch_fills_the_pool_exactly() -> None:
    # fresh seed 30158. Qwen3-Next on vLLM (the docstring's 320-token blocks, 9 state blocks a request):
    # --num-gpu-blocks-override 55,001 leaves 55,000 after the null block; 5,000 requests of 2 blocks take
    # 5,000 × (2 + 9) = 55,000, exactly the pool, so they fit: 640 tokens each (not 320)
    p = make_plan("glm-5.3-8xh200-vllm", **QWEN, num_gpu_blocks_override=55_001)
    assert workspace(p, WorkspaceQuery(batch=5_000)).ctx == 640


def test_a_query_with_no_batch_asks_about_one_request() -> None:
    # fresh seed 30158. gate and validate ask WorkspaceQuery() with no batch: one request, whose default context is
    # every page of GLM-5.3's SGLang pool, 8,869 pages × 64 tokens = 567,616 (capped at 1,048,576), and one
    # decode row of 2,048 int32 top-k indices, 8,192 B
    p = make_plan("glm-5.3-8xh200-sglang")
    assert (p.usable_pages, p.logical_page_tokens) == (8_869, 64)
    w = workspace(p, WorkspaceQuery())
    items = {i.name: i for i in w.items}
    assert (w.batch, w.ctx, items["decode top-k indices"].bytes) == (1, 567_616, 8_192)


def test_the_batch_wall_names_what_breaks_one_request_past_it() -> None:
    # fresh seed 30158. Llama-3.1-8B on SGLang, page 1, --max-total-tokens 5,000, --max-running-requests 4: 5
    # requests of 1,000 tokens fit the pool (5,000 tokens, exactly) but not the scheduler, 6 fit neither. The
    # wall is 4 and what breaks at 5 is the running-request cap, not the pool (which breaks only at 6)
    p = make_plan(
        "glm-5.3-8xh200-sglang", model="llama-3.1-8b", page_size=1, max_total_tokens=5_000, max_running_requests=4
    )
    assert p.usable_pages == 5_000
    w = next(w for w in walls(p, WorkspaceQuery(batch=1, ctx=1_000)) if w.knob == "batch")
    assert (w.largest_fitting, w.breaks) == (4, "running requests")


# ---------------------------------------------------------------- the whole module's survivors (--sample 0)


def _items(p: PoolPlan, q: WorkspaceQuery) -> dict[str, Item]:
    return {i.name: i for i in workspace(p, q).items}


def test_sglang_graph_reserve_with_and_without_its_prefill_graph() -> None:
    # reference §2.6, reserve_for_graph_mb: decode max_bs × 2 MiB (max_bs 512 at tp >= 4 on a GPU under 160 GiB),
    # plus, with a prefill graph, 1.5 × 1,024 MiB for MLA or 8 MiB per prefill capture size otherwise
    # (generate_prefill_cuda_graph_batch_sizes up to chunked_prefill_size 8,192: 8 + 14 + 8 + 8 + 12 + 8 = 58 sizes).
    q = WorkspaceQuery(batch=1, ctx=4096)
    # GLM-5.3 (MLA): 512 × 2 MiB + 1,536 MiB = 1,073,741,824 + 1,610,612,736 = 2,684,354,560 B
    glm = _items(make_plan(), q)["CUDA graphs (estimate)"]
    assert (glm.bytes, glm.detail) == (
        2_684_354_560,
        "SGLang's own reserve: decode max_bs 512 × 2 MiB + MLA prefill graph 1,536 MiB",
    )
    # Llama-3.1-8B: 1,073,741,824 + 58 × 8,388,608 = 1,560,281,088 B
    llama = _items(make_plan(model="llama-3.1-8b"), q)["CUDA graphs (estimate)"]
    assert (llama.bytes, llama.detail) == (
        1_560_281_088,
        "SGLang's own reserve: decode max_bs 512 × 2 MiB + prefill graph 58 sizes × 8 MiB",
    )
    # cuda_graph_hook.py auto-disables the prefill graph for PP > 1: tp 4 × pp 2 keeps the decode graph alone,
    # 1,073,741,824 B, MLA or not
    for model in ("glm-5.3", "llama-3.1-8b"):
        pp2 = _items(make_plan(model=model, tp=4, pp=2), q)["CUDA graphs (estimate)"]
        assert (pp2.bytes, pp2.detail) == (1_073_741_824, "SGLang's own reserve: decode max_bs 512 × 2 MiB")
    # --disable-cuda-graph: no graph is captured, nothing reserved (the line said "decode max_bs 512 × 2 MiB"
    # beside its 0 B)
    off = _items(make_plan(model="llama-3.1-8b", disable_cuda_graph="true"), q)["CUDA graphs (estimate)"]
    assert (off.bytes, off.detail) == (0, "none: --disable-cuda-graph")


def test_sglang_prefill_of_a_request_shorter_than_the_chunk() -> None:
    # GLM-5.3 on SGLang, chunked_prefill_size 8,192: a 4,096-token request prefills its 4,096 query rows (not the
    # chunk's 8,192) against 4,096 keys: 4,096 × 4,096 × 4 B = 67,108,864 B, under the ~3.4 GB budget
    # (test_sglang_static_budget_h200), one chunk; its top-k indices 4,096 × 2,048 × 4 B = 33,554,432 B
    w = workspace(make_plan(), WorkspaceQuery(batch=1, ctx=4096))
    assert w.chunk == 8192 and w.prefill is not None
    assert (w.prefill.rows, w.prefill.cols, w.prefill.chunks, w.prefill.logits_bytes) == (4096, 4096, 1, 67_108_864)
    items = {i.name: i for i in w.items}
    assert (items["prefill logits"].bytes, items["prefill logits"].detail) == (
        67_108_864,
        "4,096 rows × 4,096 keys × 4 B, one chunk",
    )
    assert items["prefill top-k indices"].bytes == 33_554_432


def test_sglang_prefill_logits_past_the_budget_name_their_chunks() -> None:
    # a 131,072-token request: 8,192 rows × 131,072 keys × 4 B = 4 GiB (4,294,967,296 B), over the ~3.4 GB budget
    # of GLM-5.3 on an H200 and under twice it, so _get_topk_ragged scores it in 2 chunks
    w = workspace(make_plan(), WorkspaceQuery(batch=1, ctx=131_072))
    assert w.prefill is not None and w.prefill.chunks == 2
    logits = next(i for i in w.items if i.name == "prefill logits")
    assert logits.detail.startswith("8,192 rows × 131,072 keys × 4 B in 2 chunks of ")


def test_a_model_without_an_indexer_has_no_logits_budget() -> None:
    # the logits budget and its row chunking belong to the DSA indexer (mqa_logits_utils): Llama-3.1-8B has
    # neither, on either engine
    for deploy in ("glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"):
        w = workspace(make_plan(deploy, model="llama-3.1-8b", context_length=131072), WorkspaceQuery(batch=1))
        assert (w.budget_bytes, w.prefill) == (0, None)


def test_vllm_scores_at_least_one_row_a_chunk() -> None:
    # vLLM's split_indexer_prefill_chunks: max_q = max(1, max_logits_bytes // 4 // keys), one query row a chunk at
    # least. At 268,435,456 keys one row is 1 GiB, past the 512 MiB cap (512 MiB // (2^28 × 4 B) = 0): the chunk is
    # that one row, 1,073,741,824 B, and the 8,192 batched rows take 8,192 chunks
    logits = _items(make_plan("glm-5.3-8xh200-vllm"), WorkspaceQuery(batch=1, ctx=1 << 28))["prefill logits"]
    assert (logits.bytes, logits.detail) == (
        1_073_741_824,
        "one row of 268,435,456 keys a chunk, past the 512 MiB cap (split_indexer_prefill_chunks: >= 1), 8,192 chunks"
        " for 8,192 rows",
    )
    # 2^27 keys × 4 B = 512 MiB a row, exactly the cap: 512 MiB // (4 × 2^27) = 1 row a chunk, within it
    logits = _items(make_plan("glm-5.3-8xh200-vllm"), WorkspaceQuery(batch=1, ctx=1 << 27))["prefill logits"]
    assert logits.detail.startswith("capped at 512 MiB: 1 rows of 134,217,728 keys a chunk")


def test_default_context_of_one_page_each_and_of_no_whole_block() -> None:
    # GLM-5.3's SGLang pool, 8,869 pages of 64: 8,869 requests hold one page each, 64 tokens (one more request
    # and none holds a page: the context length)
    p = make_plan()
    assert workspace(p, WorkspaceQuery(batch=8_869)).ctx == 64
    assert workspace(p, WorkspaceQuery(batch=8_870)).ctx == 1_048_576
    # Qwen3-Next on vLLM (the docstring's 320-token blocks and 9 state blocks a request), 56,461 usable blocks:
    # 6,000 requests of one block take 6,000 × 10 = 60,000 > 56,461, so no whole block fits each (though 56,461
    # // 6,000 = 9 blocks each would): the context length, 131,072, never 0 tokens
    q = make_plan("glm-5.3-8xh200-vllm", **QWEN, num_gpu_blocks_override=56_462)
    assert workspace(q, WorkspaceQuery(batch=6_000)).ctx == 131_072


def _wall(p: PoolPlan, knob: str, q: WorkspaceQuery) -> Wall:
    return next(w for w in walls(p, q) if w.knob == knob)


def test_the_draft_wall_names_the_engines_refusal_one_token_past_it() -> None:
    # DeepSeek-V4-Flash on SGLang: with speculative decoding the C4 compress state ring is 16 rows
    # (get_compress_state_ring_size) and serves 16 − 8 (the C4 window, 2 × 4) + 2 = 10 draft tokens
    # (get_compress_state_write_pad); DSV4PoolConfigurator._assert_ring_serves_draft_tokens refuses 11. The wall is
    # 10 and what stops it is that refusal at 11, named with its count
    w = _wall(make_plan(model="deepseek-v4-flash"), "mtp draft tokens", WorkspaceQuery(batch=1, ctx=8192))
    assert (w.largest_fitting, w.limit) == (10, 64)
    assert w.breaks.startswith("not planned: SGLang refuses it: speculative_num_draft_tokens=11 exceeds what the c4")
    assert "serves at most 10 draft tokens" in w.breaks


def test_the_draft_wall_stops_at_64_tokens() -> None:
    # walls() searches MTP draft tokens up to 64 (Wall.limit), far past any engine default (SGLang's GLM MTP
    # launch drafts 3-4). GLM-5.3 on SGLang at mem_fraction_static 0.97 (a ~4.47 GB slack: pre-load free × 0.03),
    # context_length 8,192, 4,096 running requests, 2,740 requests of 128 tokens: the persistent items are
    # req_to_token 4,097 × (8,192 + extra) × 4 B ≈ 137 MB and the graphs 512 × 2 MiB + 1,536 MiB = 2,684,354,560 B;
    # the decode phase is 2,740 × (1 + d) rows × (one 256-column logits row, 1 KiB, + 2,048 × 4 B top-k) =
    # 2,740 × (1 + d) × 9,216 B: 1,641,369,600 B at d = 64 (fits, ~6 MB left) and 1,666,621,440 B at d = 65
    # (~19 MB over). So 64 fits and 65 does not: the wall is the search's limit, with nothing breaking within it
    sets = {"context_length": 8192, "max_running_requests": 4096, "mem_fraction_static": 0.97}
    q = WorkspaceQuery(batch=2_740, ctx=128)
    assert workspace(make_plan(**sets, speculative_num_draft_tokens=64), q).fits
    assert not workspace(make_plan(**sets, speculative_num_draft_tokens=65), q).fits
    w = _wall(make_plan(**sets), "mtp draft tokens", q)
    assert (w.largest_fitting, w.breaks, w.limit) == (64, "", 64)


def test_sglang_context_wall_keeps_the_deployments_context_length() -> None:
    # SGLang sizes ReqToTokenPool once, for --context-length (max_running_requests + 1 rows × (context_len + 4)
    # int32): a request shorter than it runs on the same deployment, so growing the context up to 1,048,576 keeps
    # GLM-5.3's req_to_token at (2,048 + 1) × (1,048,576 + 4) × 4 = 8,594,161,680 B. At mem_fraction_static 0.91
    # the slack (pre-load free × 0.09) less it, the graphs (512 × 2 MiB + 1,536 MiB = 2,684,354,560 B) and the
    # pool padding leaves room for one prefill chunk of 8,192 rows × c keys × 4 B plus its 8,192 × 2,048 × 4 B =
    # 67,108,864 B of top-k indices (unchunked: under the ~2.7 GB budget), so the context stops at the last whole
    # page of 64 under (room − 67,108,864) / 32,768 tokens: 62,976, and req_to_token is the largest item over
    p = make_plan(mem_fraction_static=0.91)
    padding = p.allocated_bytes - p.available_bytes
    room = p.extras["slack_bytes"] - 8_594_161_680 - 2_684_354_560 - padding - 67_108_864
    assert room // 32_768 // 64 * 64 == 62_976
    w = _wall(p, "context", WorkspaceQuery(batch=1, ctx=8192))
    assert (w.largest_fitting, w.breaks, w.limit) == (62_976, "workspace (req_to_token)", 1_048_576)


def test_the_context_wall_stops_at_the_models_positions() -> None:
    # Llama-3.1-8B: max_position_embeddings 131,072. With allow_long_context (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_
    # LEN) SGLang would start past it, but the wall searches the model's own positions only: one request of
    # 131,072 tokens fits the pool (millions of tokens at tp 8), and nothing breaks within them
    p = make_plan(model="llama-3.1-8b", allow_long_context="true")
    w = _wall(p, "context", WorkspaceQuery(batch=1, ctx=1024))
    assert (w.largest_fitting, w.breaks, w.limit) == (131_072, "", 131_072)


def test_a_tie_between_the_phases_names_the_decode_phase() -> None:
    # GLM-5.3 on SGLang with 7 MTP draft tokens, context_length 2,048, 256 running requests, no CUDA graphs and
    # mem_fraction_static 0.9998 (a ~30 MB slack): 256 requests of 2,048 tokens.
    #   prefill: min(chunk 8,192, 2,048) = 2,048 rows × 2,048 keys (4,194,304 elements, under the 8,000,000 that ask
    #     for the budget: one chunk) × 4 B = 16,777,216 B, + 2,048 × 2,048 × 4 B top-k = 33,554,432 B
    #   decode: 256 × (1 + 7) = 2,048 rows × 2,048 keys (a whole 256-column row) × 4 B + the same top-k: 33,554,432 B
    # The phases tie, and with req_to_token (257 × (2,048 + extra) × 4 B ≈ 2.2 MB) and the padding they overfill the
    # slack. Either phase alone does; kvplan names the decode phase, the one SGLang does not budget (no smaller
    # chunk shrinks it), and its largest item, the decode logits (listed before the equal top-k)
    p = make_plan(
        mem_fraction_static=0.9998,
        disable_cuda_graph="true",
        context_length=2048,
        max_running_requests=256,
        speculative_num_draft_tokens=7,
    )
    q = WorkspaceQuery(batch=256, ctx=2048)
    ws = workspace(p, q)
    assert ws.phase_bytes("prefill") == ws.phase_bytes("decode") == 33_554_432
    assert ws.pool_fits and not ws.fits
    for w in walls(p, q):
        assert (w.largest_fitting, w.breaks) == (-1, "workspace (decode logits)")

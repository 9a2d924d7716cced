"""Workspaces outside the pool, derived from shared/reference/sglang-0.5.23.md §3, §5 and vllm-0.33.0.md §6."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.plan.admit import Request, admit
from kvplan.plan.budget import footprint
from kvplan.plan.workspace import (
    WorkspaceQuery,
    default_ctx,
    logits_row_bytes,
    sglang_prefill_chunking,
    sglang_static_budget,
    walls,
    workspace,
)
from kvplan.units import GiB, MiB
from tests.conftest import make_plan

H200_TOTAL = 143_771 * MiB  # 150,754,820,096 B, the reference's torch total_memory assumption
M = 1 << 20


def test_one_1m_logits_row() -> None:
    # 1,048,576 keys × 4 B (fp32) = 4,194,304 B = 4 MiB; 1,048,576 is a multiple of 256, so no padding
    assert logits_row_bytes(M, aligned=True) == 4 * MiB
    # 1,000 keys pad to 1,024 on DeepGEMM's paged path: 4,096 B
    assert logits_row_bytes(1000, aligned=True) == 4096
    assert logits_row_bytes(1000, aligned=False) == 4000


def test_unchunked_32k_prefill_logits() -> None:
    # 32,768 rows × 1,048,576 keys × 4 B = 137,438,953,472 B = 128 GiB
    c = sglang_prefill_chunking(32 * 1024, M, budget=10**18)
    assert c.logits_bytes == 128 * GiB


def test_sglang_static_budget_h200() -> None:
    # mfs 0.886: min(int(int(150,754,820,096 × 0.114) × 0.2), int(150,754,820,096 × 0.3))
    #          = min(int(17,186,049,490 × 0.2), 45,226,446,028) = 3,437,209,898 B (3.20 GiB)
    assert sglang_static_budget(H200_TOTAL, 0.886) == 3_437_209_898
    # mfs 0.897: int(150,754,820,096 × 0.103) = 15,527,746,469 -> × 0.2 = 3,105,549,293 B (2.89 GiB)
    assert sglang_static_budget(H200_TOTAL, 0.897) == 3_105_549_293
    # no memory fraction: the 30 % cap
    assert sglang_static_budget(H200_TOTAL, None) == int(H200_TOTAL * 0.3)


def test_prefill_chunk_count_at_the_default_budget() -> None:
    # Reference: 8,192 query tokens × 139,264 keys × 4 B = 4,563,402,752 B > 3,437,209,898 ->
    # rows per chunk = 3,437,209,898 // (139,264 × 4) = 6,170 -> cdiv(8,192, 6,170) = 2 chunks
    c = sglang_prefill_chunking(8192, 139_264, 3_437_209_898)
    assert (c.logits_bytes, c.rows_per_chunk, c.chunks) == (4_563_402_752, 6_170, 2)
    # at 1M keys: 3,437,209,898 // 4,194,304 = 819 rows -> cdiv(8,192, 819) = 11 chunks
    c = sglang_prefill_chunking(8192, M, 3_437_209_898)
    assert (c.rows_per_chunk, c.chunks) == (819, 11)


def test_small_logits_are_never_checked() -> None:
    # 2,000 × 3,999 = 7,998,000 < 8,000,000: SGLang skips the budget whatever it is
    c = sglang_prefill_chunking(2000, 3999, budget=1)
    assert not c.checked and c.chunks == 1


@pytest.mark.parametrize(("mnbt", "expected"), [(2048, 16 * MiB), (8192, 64 * MiB)])
def test_vllm_topk_indices_buffer(mnbt: int, expected: int) -> None:
    # max_num_batched_tokens × index_topk 2048 × 4 B: 2048 -> 16,777,216 B; 8192 -> 67,108,864 B
    p = make_plan("glm-5.3-8xh200-vllm", max_num_batched_tokens=mnbt)
    assert p.extras["topk_indices_buffer_bytes"] == expected
    # with MTP the draft module allocates its own copy
    assert (
        make_plan("glm-5.3-8xh200-vllm", max_num_batched_tokens=mnbt, speculative_num_draft_tokens=1).extras[
            "topk_indices_buffer_bytes"
        ]
        == 2 * expected
    )


def test_vllm_indexer_prefill_buffer() -> None:
    # max_model_len × (576 × 2 // 132 = 8) × factor × 132 B; factor 5 at <= 256K, 2 above (vLLM 0.33.0 source)
    assert (
        make_plan("glm-5.3-8xh200-vllm", context_length=163_840).extras["indexer_prefill_buffer_bytes"]
        == 163_840 * 8 * 5 * 132
        == 865_075_200
    )
    assert make_plan("glm-5.3-8xh200-vllm", context_length=M).extras["indexer_prefill_buffer_bytes"] == M * 8 * 2 * 132


def test_sglang_workspace_items_default() -> None:
    # req_to_token = (2,048 + 1) × (1,048,576 + 4) × 4 B = 8,594,161,... B: the table alone is 8.0 GiB at a 1M context
    p = make_plan()
    w = workspace(p, WorkspaceQuery(batch=4, ctx=128 * 1024))
    items = {i.name: i for i in w.items}
    assert items["req_to_token"].bytes == 2049 * (M + 4) * 4 == 8_594_161_680
    # decode logits: 4 × (1 + 0) rows × 131,072 keys × 4 B = 2 MiB, outside SGLang's budget
    assert items["decode logits"].bytes == 2 * MiB and not items["decode logits"].in_budget
    assert w.room_bytes == p.extras["slack_bytes"]
    assert w.fits


def test_mtp_multiplies_decode_logits() -> None:
    # MTP with 5 draft tokens: 6 rows a request; 1M context: 6 × 4 MiB = 24 MiB a request
    w = workspace(make_plan(), WorkspaceQuery(batch=1, ctx=M, draft_tokens=5))
    assert {i.name: i.bytes for i in w.items}["decode logits"] == 24 * MiB


def test_walls_default_128k() -> None:
    # the pool holds 8,869 pages; a 128K request takes 2,048 -> 4 requests, the 5th breaks the pool
    ws = {w.knob: w for w in walls(make_plan(), WorkspaceQuery(batch=1, ctx=128 * 1024))}
    assert ws["batch"].largest_fitting == 4 and ws["batch"].breaks == "pool pages"
    # one request alone: the context can grow to 8,869 pages × 64 = 567,616 tokens
    single = {w.knob: w for w in walls(make_plan(), WorkspaceQuery(batch=1, ctx=8192))}
    assert single["context"].largest_fitting == 567_616


def test_req_to_token_is_the_wall_with_many_running_requests() -> None:
    # max_running_requests 4,096 at a 1M context: req_to_token = 4,097 × 1,048,580 × 4 = 17,184,129,040 B
    # (16.0 GiB) > the 15.82 GiB slack: nothing fits, whatever the request
    p = make_plan(max_running_requests=4096)
    assert p.extras["req_to_token_bytes"] == 17_184_129_040
    a = admit(p, Request(ctx_tokens=8192))
    assert a.binding.name == "workspace"
    fix = {r.knob: r.value for r in a.remedies}["max_running_requests"]
    assert isinstance(fix, int) and fix < 4096
    assert admit(make_plan(max_running_requests=fix), Request(ctx_tokens=8192)).admitted
    assert not admit(make_plan(max_running_requests=fix + 1), Request(ctx_tokens=8192), remedies=False).admitted


def test_mem_fraction_can_trade_pool_for_workspace() -> None:
    # 600K tokens need mfs >= 0.9 for the pool, but at 0.91 the slack no longer holds the workspaces
    req = Request(ctx_tokens=600_000)
    assert admit(make_plan(mem_fraction_static=0.9), req).admitted
    assert admit(make_plan(mem_fraction_static=0.91), req, remedies=False).binding.name == "workspace"


def test_indexer_cache_of_1m_in_pages() -> None:
    # the "2.9 GB" indexer cache of a 1M request: 1,048,576 × 2,772 B = 2,906,652,672 B (2.91 GB, 2.71 GiB)
    # = 16,384 pages of 64 tokens × 177,408 B (64 × 2,772), not "53 pages"
    f = footprint(make_plan(), M)
    assert f.indexer_bytes == 2_906_652_672
    assert f.pages == 16_384
    assert f.indexer_bytes // f.pages == 64 * 2_772 == 177_408


def test_tail_waste() -> None:
    # 1,000 tokens take 16 pages = 1,024 slots: 24 unfilled × 53,940 B = 1,294,560 B; × 10 requests
    a = admit(make_plan(), Request(ctx_tokens=1000, concurrent=10))
    assert a.tail_waste_tokens == 24
    assert a.tail_waste_bytes == 24 * 10 * 53_940


def test_vllm_fits_by_construction() -> None:
    p = make_plan("glm-5.3-8xh200-vllm", context_length="256K")
    w = workspace(p, WorkspaceQuery(batch=1, ctx=256 * 1024))
    # the prefill logits chunk is capped at 512 MiB: 536,870,912 // (262,144 × 4) = 512 rows
    assert {i.name: i.bytes for i in w.items}["prefill logits"] == 512 * 256 * 1024 * 4
    assert w.fits
    assert replace(w, room_bytes=w.peak_bytes - 1).fits is False


def test_walls_when_already_over() -> None:
    # a 1M request does not fit the default pool (8,869 pages < 16,384): no knob can grow from there
    ws = walls(make_plan(), WorkspaceQuery(batch=1, ctx=M, draft_tokens=3))
    assert all(w.largest_fitting == -1 and w.breaks == "pool pages" for w in ws)


def test_the_last_chunk_is_the_remainder() -> None:
    # 8,192 rows × 131,072 keys × 4 B = 4 GiB against a 3 GiB budget: 3 GiB // (131,072 × 4) = 6,144 rows a
    # chunk -> cdiv(8,192, 6,144) = 2 chunks, the last of 8,192 − 6,144 = 2,048 rows = 2,048 × 524,288 B = 1 GiB
    c = sglang_prefill_chunking(8192, 128 * 1024, 3 * GiB)
    assert (c.rows_per_chunk, c.chunks, c.last_chunk_rows) == (6_144, 2, 2_048)
    assert (c.chunk_bytes, c.last_chunk_bytes) == (3 * GiB, 1 * GiB)
    # even chunks: 8,192 rows in chunks of 4,096 (budget 2 GiB): the last is a full one
    even = sglang_prefill_chunking(8192, 128 * 1024, 2 * GiB)
    assert (even.chunks, even.last_chunk_rows, even.last_chunk_bytes) == (2, 4_096, 2 * GiB)


def test_chunks_are_described_with_the_smaller_last_one() -> None:
    # Regression: "2 chunk(s), 3.00 GiB each" when the second chunk is 1 GiB (numbers from the test above;
    # 3 GiB = 3,221,225,472 B = 3.22 GB, 1 GiB = 1,073,741,824 B = 1.07 GB)
    from kvplan.render.workspace_report import _chunks_text

    text = _chunks_text(sglang_prefill_chunking(8192, 128 * 1024, 3 * GiB))
    assert text == "2 chunks: 1 of 3.00 GiB (3.22 GB), the last (2,048 rows) of 1.00 GiB (1.07 GB)"
    assert _chunks_text(sglang_prefill_chunking(8192, 128 * 1024, 2 * GiB)) == "2 chunks of 2.00 GiB (2.15 GB)"
    # below the budget: 8,192 × 1,024 × 4 B = 32 MiB (33.55 MB), one chunk
    assert _chunks_text(sglang_prefill_chunking(8192, 1024, 3 * GiB)) == "one chunk of 32.00 MiB (33.55 MB)"


def test_default_context_is_the_longest_the_pool_holds() -> None:
    # The pool holds 8,869 pages of 64 tokens (567,616 tokens) < the 1,048,576 context length:
    # one request defaults to 567,616; four to 8,869 // 4 = 2,217 pages = 141,888 tokens each
    p = make_plan()
    assert (p.usable_pages, p.logical_page_tokens, p.context_len) == (8_869, 64, M)
    assert default_ctx(p, 1) == 567_616
    assert default_ctx(p, 4) == 2_217 * 64 == 141_888
    assert workspace(p, WorkspaceQuery()).ctx == 567_616 and workspace(p, WorkspaceQuery()).pool_fits
    # more requests than pages: no context fits, so the context length itself
    assert default_ctx(p, 10_000) == M
    # a pool larger than the context length: the context length (capped)
    big = make_plan(context_length=131_072)
    assert default_ctx(big, 1) == 131_072


def test_walls_grow_the_batch_at_the_querys_context() -> None:
    # With no --ctx the context is the default for batch 1 (567,616 tokens = all 8,869 pages), and the batch
    # wall grows at that context: a second request does not fit in the pool.
    ws = {w.knob: w for w in walls(make_plan(), WorkspaceQuery())}
    assert ws["batch"].largest_fitting == 1 and ws["batch"].breaks == "pool pages"

"""plan/admission.py pinned (issue 26): the request's bad-input lines at their boundaries, the figures the checks'
details print, a logged pool's pages (vLLM's null block), a refused plan's zeros and the main-KV-only claim."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.cli._common import load_plan
from kvplan.errors import InputError
from kvplan.plan.admission import Request, largest_admitted, largest_ctx_for, pools_hold, with_pool_tokens
from kvplan.plan.admit import admit
from tests.conftest import make_plan

M = 1 << 20


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"ctx_tokens": 0}, "--ctx must be positive, got 0"),
        ({"ctx_tokens": 1, "gen_tokens": -1}, "--gen must not be negative, got -1"),
        ({"ctx_tokens": 1, "concurrent": 0}, "--concurrent must be positive, got 0"),
    ],
)
def test_bad_requests_name_the_flag_and_the_value(fields: dict[str, int], line: str) -> None:
    with pytest.raises(InputError) as e:
        Request(**fields)
    assert str(e.value) == line


def test_the_smallest_request_is_good() -> None:
    # 1 token, no output, one copy (the defaults): every bound includes its edge
    r = Request(ctx_tokens=1)
    assert (r.total_tokens, r.gen_tokens, r.concurrent) == (1, 0, 1)


def test_the_checks_of_a_short_request_as_printed() -> None:
    # GLM-5.3 on 8xH200 SGLang (glm-5.3-8xh200-sglang): 1,000 tokens take cdiv(1,000, 64) = 16 pages of the
    # 8,869 usable (567,616 tokens // 64); one request of the 2,048 max_running_requests; no DP attention, so no
    # "over N DP-attention ranks" and no "per DP rank"; the start check has no need or capacity
    a = admit(make_plan(), Request(ctx_tokens=1_000), remedies=False)
    got = {c.name: (c.need, c.have, c.detail) for c in a.checks}
    assert got["engine starts"] == (0, 0, "SGLang 0.5.23 builds the pool")
    assert got["pool pages"] == (16, 8_869, "1 × 16 pages of 64 tokens")
    assert got["running requests"] == (1, 2_048, "max_running_requests")
    # the last page's unused slots: 16 × 64 − 1,000 = 24 tokens, × 53,940 B a token (51,168 B MLA + 2,772 B index K)
    assert (a.tail_waste_tokens, a.tail_waste_bytes) == (24, 24 * 53_940)
    # the pool left after it: 567,616 − 16 × 64 = 566,592 tokens
    assert a.headroom_tokens == 566_592


def test_the_context_detail_reads_the_longest_ctx_for_the_gen() -> None:
    # SGLang 0.5.23 TokenizerManager._validate_one_request refuses input + max_new_tokens >= context_len, and
    # Scheduler.init_req_max_new_tokens cuts the output to context_len - 2 - input: 1,000 whole output tokens need
    # input <= 1,048,576 − 1,002 = 1,047,574
    a = admit(make_plan(), Request(ctx_tokens=1_000, gen_tokens=1_000), remedies=False)
    (ctx,) = (c for c in a.checks if c.name == "context length")
    assert (ctx.need, ctx.have) == (2_002, 1_048_576)
    assert ctx.detail.endswith("; the longest --ctx served with --gen 1000: 1,047,574")


def test_a_1m_request_is_short_by_the_difference() -> None:
    # 1,048,576 tokens = 16,384 pages = 1,048,576 tokens against 567,616: headroom −480,960
    a = admit(make_plan(), Request(ctx_tokens=M), remedies=False)
    assert a.headroom_tokens == 567_616 - M == -480_960


def test_a_logged_pool_in_pages() -> None:
    # SGLang: max_total_num_tokens 100,000 in pages of 64: 1,562 pages (99,968 rows), every page usable
    s = with_pool_tokens(make_plan(), 100_000)
    assert (s.usable_pages, s.rows, s.logged_tokens) == (1_562, 99_968, 100_000)
    # vLLM: 64,000 tokens = 1,000 blocks of 64, block 0 the null block (v1/core/block_pool.py BlockPool):
    # 999 usable; the planned pool is remembered to scale remedies
    v = make_plan("glm-5.3-8xh200-vllm")
    w = with_pool_tokens(v, 64_000)
    assert (w.usable_pages, w.rows) == (999, 64_000)
    assert w.extras["planned_pool_tokens"] == v.logged_tokens == 536_832


def test_a_refused_plan_holds_nothing() -> None:
    # vLLM refuses max_model_len 1,048,576 on 8xH200 (check_enough_kv_cache_memory): no pool, so nothing is
    # admitted, at once or alone, and a logged pool over it has no planned pool to scale remedies from
    r = make_plan("glm-5.3-8xh200-vllm", context_length=M)
    assert r.startup_error is not None
    assert largest_admitted(r) == 0 and not pools_hold(r, 1, 1)
    a = admit(r, Request(ctx_tokens=1_000), remedies=False)
    assert (a.max_concurrent, a.largest_ctx, a.usable_tokens) == (0, 0, 0)
    assert with_pool_tokens(r, 500_000).extras["planned_pool_tokens"] == 0


def test_main_kv_only_claim_on_vllm_keeps_the_null_block() -> None:
    # vLLM glm-5.3-8xh200-vllm: available 28,959,817,153 B // 51,168 B (the MLA row alone, no index K) = 565,975
    # rows -> // 64 × 64 = 565,952 tokens = 8,843 blocks, block 0 the null block: 8,842 usable = 565,888 tokens;
    # the largest context is max_model_len 524,288 (under 565,888); 1M needs 16,384 blocks: not admitted
    v = make_plan("glm-5.3-8xh200-vllm")
    assert v.available_bytes == 28_959_817_153
    c = admit(v, Request(ctx_tokens=M), remedies=False).main_only
    assert (c.cell_bytes, c.pool_tokens, c.largest_ctx, c.admitted) == (51_168, 565_952, 524_288, False)
    # 8,842 one-page requests fill the usable blocks; 8,843 would need the null block
    assert admit(v, Request(ctx_tokens=64, concurrent=8_842), remedies=False).main_only.admitted
    assert not admit(v, Request(ctx_tokens=64, concurrent=8_843), remedies=False).main_only.admitted


def test_main_kv_only_claim_under_dcp_is_logical_tokens() -> None:
    # SGLang dcp 8: 32,259,822,321 B available // 44,928 B (the trtllm MLA row, no index K) = 718,033 rows,
    # // 64 × 64 = 718,016 rows a rank; the logical pool is rows × dcp = 5,744,128 tokens (logical_max_total_num_tokens)
    p = make_plan(dcp=8)
    assert p.available_bytes == 32_259_822_321
    c = admit(p, Request(ctx_tokens=M), remedies=False).main_only
    assert (c.cell_bytes, c.pool_tokens) == (44_928, 718_016 * 8) == (44_928, 5_744_128)


def test_the_tail_waste_of_two_copies() -> None:
    # two 1,000-token requests on one pool: each leaves 24 slots of its last page, 2 × 24 × 53,940 B on a GPU
    a = admit(make_plan(), Request(ctx_tokens=1_000, concurrent=2), remedies=False)
    assert (a.per_rank, a.tail_waste_tokens, a.tail_waste_bytes) == (2, 24, 2 * 24 * 53_940)


def test_a_hybrid_pool_check_reads_its_pages() -> None:
    # gpt-oss-120b on SGLang, 64-token pages: 2 × 100,000 tokens; the full-attention pool holds every token's row:
    # cdiv(100,000, 64) = 1,563 pages a request, 2 × 1,563 = 3,126 of the pool's pages
    p = load_plan("gpt-oss-120b", None, ["kv_cache_dtype=fp8_e4m3", "page_size=64"])
    a = admit(p, Request(ctx_tokens=100_000, concurrent=2), remedies=False)
    (full,) = (c for c in a.checks if c.name == "pool: full attention (18 layers)")
    assert (full.need, full.unit, full.detail) == (3_126, "pages", "2 × 1,563 pages (1,563 full attention)")


def test_the_tightest_check_is_the_least_headroom_relative_to_capacity() -> None:
    # 1,000 tokens on the preset, all checks passing: context 1,000 of 1,048,576 (99.9 % left), pages 16 of
    # 8,869 (99.8 %), requests 1 of 2,048 (99.95 %), workspaces 11,290,943,363 of 16,990,127,259 B (33.5 %): the
    # workspace binds, whatever order the checks are in
    a = admit(make_plan(), Request(ctx_tokens=1_000), remedies=False)
    ws = next(c for c in a.checks if c.name == "workspace")
    assert (ws.need, ws.have) == (11_290_943_363, 16_990_127_259)
    assert a.admitted and a.binding.name == "workspace"


def test_main_kv_only_longest_ctx_under_dcp_reads_the_logical_pool() -> None:
    # SGLang TpModelWorker: max_req_len = min(context_len − 1, max_total_num_tokens − 1), max_total_num_tokens the
    # logical pool (5,744,128 main-only tokens at dcp 8, not a rank's 718,016 rows): the context binds, and with
    # --gen 1000 the longest --ctx is 1,048,576 − (1,000 + 2) = 1,047,574
    c = admit(make_plan(dcp=8), Request(ctx_tokens=1_000, gen_tokens=1_000), remedies=False).main_only
    assert (c.pool_tokens, c.largest_ctx) == (5_744_128, 1_047_574)


def test_a_logged_vllm_pool_of_one_block_has_no_usable_page() -> None:
    # "GPU KV cache size: 64 tokens" at block 64 is one block, and block 0 is the null block (v1/core/block_pool.py
    # BlockPool: null_block = the first free block): no page is left for a request
    assert with_pool_tokens(make_plan("glm-5.3-8xh200-vllm"), 64).usable_pages == 0


def test_a_logged_pool_under_the_context_holds_ctx_plus_gen() -> None:
    # vLLM allocates slots for the prompt and every generated token (KVCacheManager.allocate_slots): 64,000 logged
    # tokens = 999 usable blocks × 64 = 63,936 tokens (test_a_logged_pool_in_pages), under max_model_len 524,288;
    # with --gen 1000 the longest --ctx the pool holds is 63,936 − 1,000 = 62,936
    w = with_pool_tokens(make_plan("glm-5.3-8xh200-vllm"), 64_000)
    assert largest_ctx_for(w, Request(ctx_tokens=1, gen_tokens=1_000)) == 62_936


def test_the_context_detail_without_gen_says_sglangs_output_cut() -> None:
    # with --gen 0 the ctx is a context length to run with; SGLang's Scheduler.init_req_max_new_tokens cuts the
    # output to max_req_len − input − 1 = context_len − 2 − input
    a = admit(make_plan(), Request(ctx_tokens=1_000), remedies=False)
    (ctx,) = (c for c in a.checks if c.name == "context length")
    assert ctx.detail == "ctx against --context-length / max_model_len; SGLang cuts the output 2 tokens short of it"


def test_one_copy_of_two_fits_at_once() -> None:
    # 300,000 tokens = cdiv(300,000, 64) = 4,688 pages; the preset's 8,869 usable pages hold 8,869 // 4,688 = 1:
    # one of the two at once, said as fewer_at_once
    a = admit(make_plan(), Request(ctx_tokens=300_000, concurrent=2), remedies=False)
    assert (a.admitted, a.max_concurrent, a.fewer_at_once) == (False, 1, 1)


def test_main_kv_only_claim_counts_every_page_of_every_copy() -> None:
    # vLLM main-KV-only: 8,842 usable blocks (test_main_kv_only_claim_on_vllm_keeps_the_null_block); two copies of
    # 300,000 tokens need 2 × 4,688 = 9,376 blocks: not admitted, though one copy (4,688) would be
    v = make_plan("glm-5.3-8xh200-vllm")
    assert not admit(v, Request(ctx_tokens=300_000, concurrent=2), remedies=False).main_only.admitted
    assert admit(v, Request(ctx_tokens=300_000), remedies=False).main_only.admitted


def test_main_kv_only_claim_admits_a_ctx_of_exactly_the_context_length() -> None:
    # with --gen 0 a ctx of context_len (1,048,576) is a context length the engine runs with (lengths.ContextLimit:
    # needs = ctx); at dcp 8 the main-only pool holds 5,744,128 logical tokens: admitted
    c = admit(make_plan(dcp=8), Request(ctx_tokens=M), remedies=False).main_only
    assert (c.pool_tokens, c.admitted) == (5_744_128, True)


def test_no_main_row_claims_no_main_only_pool() -> None:
    # a plan without a main KV row (cell 0 B) has no main-KV-only pool to claim: 0 tokens, so no context (fresh seed
    # 59322's neighbour: not one 64-token page's) and no request of 1,000 tokens
    p = make_plan()
    bare = replace(p, cell=replace(p.cell, main_bytes=0, draft_main_bytes=0))
    c = admit(bare, Request(ctx_tokens=1_000), remedies=False).main_only
    assert (c.pool_tokens, c.largest_ctx, c.admitted) == (0, 0, False)


def test_a_started_hybrid_whose_pool_holds_nothing_admits_no_context() -> None:
    # gpt-oss-120b on SGLang: with its full-attention pool emptied (0 pages), no request of even 1 token fits
    p = load_plan("gpt-oss-120b", None, ["kv_cache_dtype=fp8_e4m3", "page_size=64"])
    empty = replace(p, pools=tuple(replace(q, capacity=0) for q in p.pools))
    assert (empty.startup_error, largest_admitted(empty)) == (None, 0)


def test_the_pool_holds_the_prompt_and_the_output() -> None:
    # the KV pool keeps every token a request writes, its output included (SGLang allocates a slot per decoded
    # token): 1,000 + 1,000 = 2,000 tokens = cdiv(2,000, 64) = 32 pages of the 8,869
    a = admit(make_plan(), Request(ctx_tokens=1_000, gen_tokens=1_000), remedies=False)
    (pages,) = (c for c in a.checks if c.name == "pool pages")
    assert (pages.need, pages.have, pages.detail) == (32, 8_869, "1 × 32 pages of 64 tokens")


def test_a_ctx_of_exactly_the_context_length_runs_as_many_as_fit() -> None:
    # --context-length 100,000: the pool stays 8,869 pages (SGLang's cell and budget do not read the context; the
    # req_to_token table is outside the pool budget);
    # max_running_requests = clamp(int(567,616 / 100,000 × 512) = 2,906, 2,048, 4,096) = 2,906; a ctx of exactly
    # 100,000 with --gen 0 is served (lengths.ContextLimit), 1,563 pages each: 8,869 // 1,563 = 5 at once
    p = make_plan(context_length=100_000)
    assert (p.usable_pages, p.max_running_requests) == (8_869, 2_906)
    a = admit(p, Request(ctx_tokens=100_000), remedies=False)
    assert (a.admitted, a.max_concurrent) == (True, 5)


def test_main_kv_only_claim_on_sglang_has_no_null_page() -> None:
    # fresh seed 59322. SGLang's paged allocator (mem_cache/allocator.py PagedTokenToKVPoolAllocator) frees pages
    # 1..num_pages, num_pages = size // page_size, its padding page allocated beside them: every page holds a request.
    # The preset: 30,620,424,077 B available // 51,168 B (the MLA row alone) = 598,437 rows -> // 64 × 64 = 598,400
    # = 9,350 pages; 9,350 one-page requests fit the main-only claim (vLLM's null block would leave 9,349), 9,351 do not
    p = make_plan()
    assert (p.engine, p.available_bytes, p.cell.main_only_bytes) == ("sglang", 30_620_424_077, 51_168)
    assert admit(p, Request(ctx_tokens=64, concurrent=9_350), remedies=False).main_only.admitted
    assert not admit(p, Request(ctx_tokens=64, concurrent=9_351), remedies=False).main_only.admitted


def test_a_refused_plans_main_kv_only_claim_has_no_longest_context() -> None:
    # fresh seed 59322. vLLM refuses max_model_len 1,048,576 on 8xH200 (test_a_refused_plan_holds_nothing): the
    # engine never serves, so even the main-KV-only claim's longest context is 0 tokens
    r = make_plan("glm-5.3-8xh200-vllm", context_length=M)
    assert r.startup_error is not None
    assert admit(r, Request(ctx_tokens=1_000), remedies=False).main_only.largest_ctx == 0


def test_a_one_block_main_kv_only_vllm_pool_admits_nothing() -> None:
    # fresh seed 59322. --kv-cache-memory-bytes 3,274,752 = 64 rows × 51,168 B: one block of 64 tokens, and it is
    # vLLM's null block (v1/core/block_pool.py BlockPool): no block is left, so a 64-token request is not admitted
    # even by the main-KV-only claim (its 64 tokens are the pool's, not a request's)
    v = make_plan("glm-5.3-8xh200-vllm", kv_cache_memory="3274752B")
    c = admit(v, Request(ctx_tokens=64), remedies=False).main_only
    assert (c.pool_tokens, c.largest_ctx, c.admitted) == (64, 0, False)


def test_the_tail_waste_under_dcp_is_one_gpus_share() -> None:
    # whole-module run 41291. SGLang dcp 8: a logical page is 64 × 8 = 512 tokens, so 1,000 tokens take 2 pages and
    # leave 24 slots. get_cell_size_per_token charges a rank row 44,928 B of MLA plus the indexer K replicated over
    # dcp (22,176 B = 2,772 × 8); one GPU keeps 1/8 of the tokens' MLA rows and all their index K: per logical token
    # 44,928 / 8 + 2,772 = 8,388 B, 24 × 8,388 = 201,312 B (not 8 × 24 × 67,104)
    p = make_plan(dcp=8)
    assert (p.logical_page_tokens, p.cell.main_bytes, p.cell.indexer_bytes) == (512, 44_928, 22_176)
    a = admit(p, Request(ctx_tokens=1_000), remedies=False)
    assert (a.tail_waste_tokens, a.tail_waste_bytes) == (24, 201_312)


def test_a_ctx_of_exactly_the_context_length_is_not_over_it() -> None:
    # whole-module run 41291. With --gen 0 a ctx of context_len is a context length to run with (lengths.ContextLimit:
    # needs = ctx): --context-length 100,000 takes a 100,000-token ctx, 100,001 is over it
    q = make_plan(context_length=100_000)
    assert not admit(q, Request(ctx_tokens=100_000), remedies=False).over_context
    assert admit(q, Request(ctx_tokens=100_001), remedies=False).over_context


def test_exactly_max_running_requests_copies_run() -> None:
    # whole-module run 41291. --max-running-requests is the most requests SGLang runs at once (server_args:
    # "The maximum number of running requests"): a cap of 4 runs 4 copies of 1,000 tokens, and a 5th waits
    r = make_plan(max_running_requests=4)
    checks = {c.name: c for c in admit(r, Request(ctx_tokens=1_000, concurrent=4), remedies=False).checks}
    assert checks["running requests"].ok
    checks = {c.name: c for c in admit(r, Request(ctx_tokens=1_000, concurrent=5), remedies=False).checks}
    assert not checks["running requests"].ok


@pytest.mark.parametrize(
    ("model", "sets"), [("qwen3-next-80b-a3b", {"context_length": 262_144}), ("llama-3.1-8b", {"tp": 1})]
)
def test_sglangs_request_length_cap_binds_a_hybrid_as_any_model(model: str, sets: dict[str, object]) -> None:
    # SGLang's scheduler caps a request at max_req_len = min(context_len - 1, max_total_num_tokens - 1)
    # (tp_worker / Scheduler) whatever the model: a Mamba hybrid (Qwen3-Next) as a full-attention one (Llama-3.1-8B).
    # With --max-total-tokens 100,000 under a longer context, the cut "output at context_len - 2 - input" runs on
    # 100,000: with 100 tokens to generate the longest prompt is 100,000 - 2 - 100 = 99,898 (the pool alone said
    # 99,900 for the hybrid)
    plan = make_plan(
        "glm-5.3-8xh200-sglang", model=model, max_total_tokens=100_000, dcp=1, kv_cache_dtype="auto",
        mla_layout="default", attention_backend="default", page_size="default", **sets,
    )  # fmt: skip
    assert plan.logged_tokens == 100_000 and plan.context_len > 100_000
    assert admit(plan, Request(ctx_tokens=1_000, gen_tokens=100)).largest_ctx == 99_898


def test_a_gen_the_pool_cannot_hold_leaves_no_ctx() -> None:
    # the default plan's pool holds 567,616 tokens (8,869 pages of 64); a request asking 600,000 output tokens
    # does not fit whatever its prompt: the longest --ctx is 0 (567,616 − 600,000 < 0), not a token; and one
    # asking exactly the pool leaves 0 too (567,616 − 567,616)
    p = make_plan()
    assert largest_admitted(p) == 567_616
    assert largest_ctx_for(p, Request(ctx_tokens=1, gen_tokens=600_000)) == 0
    assert largest_ctx_for(p, Request(ctx_tokens=1, gen_tokens=567_616)) == 0

"""Admission on the default deployment (GLM-5.3 FP8, 8×H200, SGLang TP8, fp8_ds_mla, page 64)."""

from __future__ import annotations

from kvplan.plan.admit import Request, admit, with_pool_tokens
from kvplan.plan.budget import budget
from tests.conftest import make_plan

M = 1 << 20


def test_default_1m_rejected_on_pool_pages() -> None:
    # pool: 567,616 tokens = 8,869 pages (test_sglang.test_default_deployment_rejects_1m);
    # 1M needs 1,048,576 / 64 = 16,384 pages -> rejected by the pool
    a = admit(make_plan(), Request(ctx_tokens=M))
    assert not a.admitted
    assert a.binding.name == "pool pages"
    assert (a.binding.need, a.binding.have) == (16_384, 8_869)
    assert a.largest_ctx == 567_616
    assert a.max_concurrent == 0
    assert a.headroom_tokens == 567_616 - M


def test_default_1m_remedy_is_dcp2_and_really_admits() -> None:
    # dcp 2: backend trtllm (raw 576 B) and no prefill graph: mfs 0.897;
    # cell = 576 × 78 + 132 × 21 × 2 = 44,928 + 5,544 = 50,472 B per row of 2 tokens
    a = admit(make_plan(), Request(ctx_tokens=M))
    remedies = {r.knob: r for r in a.remedies}
    assert remedies["dcp"].value == 2
    fixed = make_plan(dcp=2)
    assert fixed.cell.total_bytes == 50_472
    assert admit(fixed, Request(ctx_tokens=M)).admitted
    assert remedies["dcp"].pool_tokens == fixed.logged_tokens


def test_mem_fraction_remedy_is_the_smallest() -> None:
    # 600K tokens do not fit at mfs 0.886 (567,616); the remedy is the smallest mfs (in 0.001 steps) that fits
    req = Request(ctx_tokens=600_000)
    a = admit(make_plan(), req)
    mfs = {r.knob: r.value for r in a.remedies}["mem_fraction_static"]
    assert isinstance(mfs, float)
    assert admit(make_plan(mem_fraction_static=mfs), req).admitted
    assert not admit(make_plan(mem_fraction_static=round(mfs - 0.001, 3)), req).admitted


def test_bf16_remedy_is_fp8() -> None:
    # bf16 (92,628 B/token) holds fewer tokens than fp8_ds_mla (53,940): a 500K request needs the fp8 cache
    req = Request(ctx_tokens=500_000)
    a = admit(make_plan(kv_cache_dtype="bf16"), req)
    assert not a.admitted
    assert {r.knob: r.value for r in a.remedies}["kv_cache_dtype"] == "fp8_e4m3"


def test_main_only_plan_would_have_claimed_more() -> None:
    # main-only cell 51,168: 30,620,424,077 // 51,168 = 598,429 -> 598,400 tokens (vs 567,616 real)
    a = admit(make_plan(), Request(ctx_tokens=580_000))
    assert a.main_only.pool_tokens == 598_400
    assert a.main_only.admitted and not a.admitted


def test_concurrency() -> None:
    # 128K = 2,048 pages; 8,869 // 2,048 = 4 requests at once
    a = admit(make_plan(), Request(ctx_tokens=128 * 1024, concurrent=5))
    assert not a.admitted
    assert a.max_concurrent == 4
    assert admit(make_plan(), Request(ctx_tokens=128 * 1024, concurrent=4)).admitted


def test_fewer_at_once_is_not_a_remedy() -> None:
    # admit --ctx 128K -n 8 used to propose `--set concurrent=4`, which is not a knob (exit 2).
    # 4 of the 8 fit (8,869 // 2,048 = 4): that is Admission.fewer_at_once, not a deployment change.
    # The remedy is dcp 2: cell 50,472 B per row of 2 tokens (576 × 78 + 132 × 21 × 2), mfs 0.897:
    # 1,278,208 tokens = 9,986 pages of 128; 8 × cdiv(131,072, 128) = 8 × 1,024 = 8,192 <= 9,986.
    a = admit(make_plan(), Request(ctx_tokens=128 * 1024, concurrent=8))
    assert not a.admitted
    assert a.fewer_at_once == 4
    assert "concurrent" not in {r.knob for r in a.remedies}
    # and DP attention 2: two pools, 4 of the 8 requests each (4 × 2,048 = 8,192 pages), the dp-2 pool from the
    # engine's own heuristic (its dp-attention reserve): tests/plan/test_admit_dp.py
    dp2 = make_plan(dp_attention=2)
    assert [(r.knob, r.value, r.pool_tokens) for r in a.remedies] == [
        ("dcp", 2, 1_278_208),
        ("dp_attention", 2, dp2.logged_tokens),
    ]
    # admitted, or a single request that does not fit: no "fewer at once" line
    assert admit(make_plan(), Request(ctx_tokens=128 * 1024, concurrent=4)).fewer_at_once is None
    assert admit(make_plan(), Request(ctx_tokens=M, concurrent=2)).fewer_at_once is None


def test_pool_tokens_keep_the_remedies() -> None:
    # admit --ctx 1M --pool-tokens 567616 used to say "none found" while the planned pool (567,616) gives dcp 2.
    # Remedies re-plan the deployment and scale its pool by logged / planned: here 567,616 / 567,616 = 1, so the
    # same dcp 2 at 1,278,208 tokens.
    a = admit(with_pool_tokens(make_plan(), 567_616), Request(ctx_tokens=M), pool_source="log")
    assert [(r.knob, r.value, r.pool_tokens) for r in a.remedies] == [("dcp", 2, 1_278_208)]
    assert "scaled by logged / planned = 567,616 / 567,616" in a.remedies[0].detail
    # a log with fewer tokens: 1,278,208 × 500,000 // 567,616 = 1,125,944 -> to the 128-token page: 1,125,888
    # = 8,796 pages, still >= 8,192 for 1M at dcp 2
    b = admit(with_pool_tokens(make_plan(), 500_000), Request(ctx_tokens=M), pool_source="log")
    assert [(r.knob, r.value, r.pool_tokens) for r in b.remedies] == [("dcp", 2, 1_125_888)]


def test_pool_tokens_from_a_log() -> None:
    # "my log says 1,000,000 tokens": 1,000,000 // 64 = 15,625 pages < 16,384 for 1M -> rejected
    p = with_pool_tokens(make_plan(), 1_000_000)
    assert not admit(p, Request(ctx_tokens=M), pool_source="log").admitted
    # 900K = 921,600 tokens = 14,400 pages <= 15,625
    assert admit(p, Request(ctx_tokens=900 * 1024), pool_source="log").admitted


def test_context_length_binds() -> None:
    # a prompt of 131,072 and one token asked for on SGLang: the scheduler refuses input >= max_req_input_len =
    # (context_len - 1) - 5 (tp_worker.py, managers/utils.validate_input_length), so context_len must be
    # 131,072 + 7 = 131,079 (kvplan.lengths)
    a = admit(make_plan(context_length="128K"), Request(ctx_tokens=128 * 1024, gen_tokens=1))
    assert a.binding.name == "context length"
    assert (a.binding.need, a.binding.have) == (131_079, 131_072)
    assert {r.knob: r.value for r in a.remedies}["context_length"] == 131_079


def test_budget_shares() -> None:
    # indexer / main = 2,772 / 51,168 = 5.417 %; indexer / total = 2,772 / 53,940 = 5.139 % (in ppm)
    b = budget(make_plan(), (8192, M))
    assert b.indexer_share_of_main_ppm == 2_772 * 1_000_000 // 51_168 == 54_174
    assert b.indexer_share_of_total_ppm == 51_390
    # one 64-token page: 64 × 53,940 = 3,452,160 B
    assert b.per_page.total_bytes == 3_452_160
    assert b.per_context[0].pages == 128
    # expected tail waste: (64 − 1) / 2 rows × 53,940 = 1,699,110 B
    assert b.tail_waste_bytes == 1_699_110

"""DP attention in admit: N requests spread over the DP-attention ranks, each with its own pool (issue 12 item 5).

SGLang ``--enable-dp-attention --dp d``: each DP worker has its own scheduler, KV pool and
``max_running_requests // d`` (shared/reference/sglang-0.5.23.md §5: "R = max_running_requests per DP worker");
vLLM ``--data-parallel-size d``: one engine core and block pool per DP rank. MLA keeps the whole latent on every
rank, so a DP rank's pool rows are a GPU's pool rows; the requests are what is divided.
"""

from __future__ import annotations

import pytest

from kvplan.plan.admit import Request, admit, dp_ranks, per_dp_rank
from tests.conftest import make_plan

K128 = 128 * 1024
PAGES_128K = K128 // 64
"""2,048 pages of 64 tokens for one 128K request."""


@pytest.mark.parametrize(("n", "dp", "per_rank"), [(8, 1, 8), (8, 2, 4), (8, 8, 1), (9, 2, 5), (1, 8, 1), (20, 8, 3)])
def test_requests_per_rank_is_ceil_n_over_dp(n: int, dp: int, per_rank: int) -> None:
    p = make_plan(dp_attention=dp)
    assert dp_ranks(p) == dp
    assert per_dp_rank(p, n) == per_rank == -(-n // dp)


def test_the_pool_check_counts_one_ranks_share() -> None:
    # dp 2: 8 requests -> 4 on a rank: 4 × 2,048 = 8,192 pages against that rank's usable pages
    p = make_plan(dp_attention=2)
    a = admit(p, Request(ctx_tokens=K128, concurrent=8))
    pages = next(c for c in a.checks if c.name == "pool pages")
    assert (pages.need, pages.have) == (4 * PAGES_128K, p.usable_pages)
    assert pages.ok == (p.usable_pages >= 8_192)
    assert "8 requests over 2 DP-attention ranks" in pages.detail
    running = next(c for c in a.checks if c.name == "running requests")
    assert (running.need, running.have) == (4, p.max_running_requests)
    assert running.detail.endswith("per DP rank")
    # the workspace is one rank's: a batch of 4
    assert a.workspace.batch == 4


def test_at_once_multiplies_by_the_ranks() -> None:
    # each rank holds usable_pages // 2,048 such requests (capped by its max_running_requests); d ranks hold d ×
    for dp in (1, 2, 4, 8):
        p = make_plan(dp_attention=dp)
        a = admit(p, Request(ctx_tokens=K128))
        assert a.max_concurrent == min(p.usable_pages // PAGES_128K, p.max_running_requests) * dp


def test_without_dp_attention_nothing_changes() -> None:
    # the TP8 default: 8,869 usable pages // 2,048 = 4 at once (test_admit.test_concurrency)
    p = make_plan()
    a = admit(p, Request(ctx_tokens=K128, concurrent=5))
    assert a.per_rank == 5 and a.max_concurrent == 4 and not a.admitted


def test_dp_attention_remedy_admits_when_fed_back() -> None:
    # 8 × 128K on the default TP8: one request fits (2,048 <= 8,869 pages), eight do not (16,384)
    a = admit(make_plan(), Request(ctx_tokens=K128, concurrent=8))
    dp = [r for r in a.remedies if r.knob == "dp_attention"]
    assert len(dp) == 1
    back = make_plan(dp_attention=dp[0].value)
    assert back.logged_tokens == dp[0].pool_tokens
    assert admit(back, Request(ctx_tokens=K128, concurrent=8)).admitted
    # the smallest that admits: dp 2 (the divisors of tp 8 above 1, in order)
    assert dp[0].value == 2


def test_no_dp_remedy_when_one_request_does_not_fit() -> None:
    # 1M needs 16,384 pages > 8,869: more pools do not give one request more room
    a = admit(make_plan(), Request(ctx_tokens=1 << 20))
    assert "dp_attention" not in {r.knob for r in a.remedies}


def test_no_dp_remedy_for_a_gqa_model() -> None:
    # full attention splits kv heads over attention tp: DP attention is the engines' MLA layout, not offered here
    p = make_plan(model="llama-3.1-70b", kv_cache_dtype="auto", page_size=1, context_length=131072)
    a = admit(p, Request(ctx_tokens=K128, concurrent=64))
    assert "dp_attention" not in {r.knob for r in a.remedies}

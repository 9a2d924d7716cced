"""admit on a plan with several pools (issue 13's hybrid shape, kvplan.engines.common.Pool / Demand).

The engines fill ``PoolPlan.pools`` for hybrid models; admit checks every pool (N requests per DP rank × what one
takes ≤ capacity) and names the one that binds. Here the pools are built by hand on the default plan so that the
arithmetic is visible; a uniform plan (no pools) keeps its one 'pool pages' check, figures unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.common import Demand, Pool
from kvplan.plan.admit import Request, admit, largest_admitted
from tests.conftest import make_plan

K128 = 128 * 1024


def _hybrid(token_pages: int, slots: int, window_pages: int = 0) -> object:
    """A plan with a token pool (64-token pages), a state pool (one slot a request) and optionally a window pool."""
    pools = [
        Pool(name="full", unit="page", page_tokens=64, capacity=token_pages, unit_bytes=1,
             demands=(Demand("full attention", "token"),)),
        Pool(name="state", unit="slot", page_tokens=1, capacity=slots, unit_bytes=1,
             demands=(Demand("linear state", "request"),)),
    ]  # fmt: skip
    if window_pages:
        pools.append(
            Pool(name="window", unit="page", page_tokens=64, capacity=window_pages, unit_bytes=1,
                 demands=(Demand("sliding window", "window", window=128, extra=1),))
        )  # fmt: skip
    return replace(make_plan(), pools=tuple(pools))


def test_state_slots_bind() -> None:
    # 8 × 128K: the token pool needs 8 × 2,048 = 16,384 of 100,000 pages; the state pool 8 × 1 of 6 slots: binds
    p = _hybrid(token_pages=100_000, slots=6)
    a = admit(p, Request(ctx_tokens=K128, concurrent=8))
    failed = [c for c in a.checks if not c.ok]
    assert [(c.name, c.need, c.have) for c in failed] == [("pool: state", 8, 6)]
    assert a.binding.name == "pool: state"
    # at once: min(100,000 // 2,048 = 48, 6 // 1 = 6, max_running_requests) = 6
    assert a.max_concurrent == min(48, 6, p.max_running_requests) == 6


def test_token_pages_bind() -> None:
    # the same with 10,000 pages and 64 slots: 8 × 2,048 = 16,384 > 10,000 pages; 8 ≤ 64 slots
    p = _hybrid(token_pages=10_000, slots=64)
    a = admit(p, Request(ctx_tokens=K128, concurrent=8))
    assert [c.name for c in a.checks if not c.ok] == ["pool: full"]
    assert a.max_concurrent == 10_000 // 2_048 == 4


def test_a_window_costs_its_window_whatever_the_length() -> None:
    # a 128-token window + vLLM's one extra page: ceil(128 / 64) + 1 = 3 pages, at 1K and at 128K alike
    p = _hybrid(token_pages=100_000, slots=64, window_pages=30)
    for ctx in (1024, K128):
        a = admit(p, Request(ctx_tokens=ctx, concurrent=10))
        window = next(c for c in a.checks if c.name == "pool: window")
        assert (window.need, window.have, window.ok) == (10 * 3, 30, True)
    assert not admit(p, Request(ctx_tokens=1024, concurrent=11)).admitted  # 33 > 30 pages


def test_largest_admitted_of_a_hybrid_is_the_tightest_pool() -> None:
    # one request: the token pool holds 10,000 pages × 64 = 640,000 tokens; the state and the window pools hold
    # one request of any length; so the largest context is 640,000 (under the 1M context length)
    p = _hybrid(token_pages=10_000, slots=1, window_pages=3)
    assert largest_admitted(p) == 640_000


def test_a_uniform_plan_keeps_its_pool_pages_check() -> None:
    p = make_plan()
    assert not p.pools
    a = admit(p, Request(ctx_tokens=K128, concurrent=5))
    pages = next(c for c in a.checks if c.name == "pool pages")
    # 5 × 2,048 = 10,240 > 8,869 usable pages (test_admit.test_concurrency)
    assert (pages.need, pages.have, pages.ok) == (10_240, 8_869, False)
    assert a.max_concurrent == 4

"""The shared pool shape (kvplan.engines.common Demand / Pool / PoolPlan.hybrid_pools), issue 13."""

from __future__ import annotations

import pytest

from kvplan.engines.common import Demand, Pool
from tests.conftest import make_plan


def test_demand_need_per_kind() -> None:
    # per token: ceil(129 / 64) = 3 pages
    assert Demand("full", "token").need(129, 64) == 3
    # per window: min(100_000, 128 + 8_191) = 8_319 tokens held, ceil(8_319 / 16) = 520, + 1 extra page = 521
    assert Demand("swa", "window", window=8_319, extra=1).need(100_000, 16) == 521
    # a short request is below its window: ceil(10 / 16) = 1, + 1 = 2
    assert Demand("swa", "window", window=8_319, extra=1).need(10, 16) == 2
    # per request: a fixed 3 blocks whatever the length (three Mamba groups)
    assert Demand("mamba", "request", units=3).need(1, 16) == Demand("mamba", "request", units=3).need(10**6, 16) == 3
    # units multiply a per-token demand: two full-attention groups, ceil(129 / 64) × 2 = 6
    assert Demand("full", "token", units=2).need(129, 64) == 6


def test_pool_need_sums_its_demands_and_fits() -> None:
    pool = Pool("blocks", "block", 16, 1_000, 4096, (Demand("full", "token"), Demand("mamba", "request", units=3)))
    # 1,000 tokens: ceil(1000 / 16) = 63 + 3 = 66 blocks; 1,000 // 66 = 15 requests
    assert pool.need(1_000) == 66
    assert pool.fits(1_000) == 15
    assert pool.bytes == 1_000 * 4096


@pytest.mark.parametrize("preset", ["glm-5.3-8xh200-vllm", "glm-5.3-8xh200-sglang"])
def test_uniform_plan_implies_its_one_pool(preset: str) -> None:
    p = make_plan(preset)
    assert p.pools == ()
    (pool,) = p.hybrid_pools
    # the one pool IS the plan's pages: same capacity, same page, ceil(tokens / page) a request
    assert pool.capacity == p.usable_pages
    assert pool.page_tokens == p.logical_page_tokens
    assert pool.need(131_072) == p.pages_for(131_072)
    assert pool.unit_bytes == p.cell.total_bytes * p.page_tokens

"""Issue 13's properties for the hybrids planned with speculative decoding (MTP), on both engines: adding a request
never lowers any pool's use, and more draft tokens never lower what one request takes from a pool.

The plans: the H200 TP8 presets with --set speculative_num_draft_tokens=D (SGLang's NEXTN draft tokens; vLLM's
num_speculative_tokens), D ≤ 4, for Qwen3-Next, GLM-5.3-Flash and DeepSeek-V4-Flash (SGLang's C4 ring serves up to
10 draft tokens). On vLLM a group holds 2 + checkpoint + D state blocks, and the MTP layer may regroup the layers
(GLM-5.3-Flash: 4 KDA groups × 3 blocks without it, 3 × 4 with D = 1): a request's blocks never fall.
"""

from __future__ import annotations

from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from kvplan.engines.common import PoolPlan
from tests.conftest import make_plan
from tests.property.test_hybrid_pool_use import _pool_needs

MODELS = ("qwen3-next-80b-a3b", "glm-5.3-flash", "deepseek-v4-flash")
ENGINES = ("sglang", "vllm")


@cache
def _plan(model: str, engine: str, d: int) -> PoolPlan:
    sets: dict[str, object] = {"speculative_num_draft_tokens": d}
    if engine == "vllm" and model == "qwen3-next-80b-a3b":
        sets["context_length"] = 131072  # the vLLM preset's 524,288 is past Qwen3-Next's positions
    return make_plan(f"glm-5.3-8xh200-{engine}", model, **sets)


@given(
    model=st.sampled_from(MODELS),
    engine=st.sampled_from(ENGINES),
    d=st.integers(min_value=1, max_value=4),
    n=st.integers(min_value=1, max_value=64),
    ctx=st.integers(min_value=1, max_value=131_072),
    more=st.integers(min_value=0, max_value=4096),
)
def test_adding_a_request_never_lowers_any_pools_use_with_mtp(
    model: str, engine: str, d: int, n: int, ctx: int, more: int
) -> None:
    plan = _plan(model, engine, d)
    base = _pool_needs(plan, n, ctx)
    assert base, f"{model} on {engine} with {d} draft tokens planned no pools"
    plus_one, longer = _pool_needs(plan, n + 1, ctx), _pool_needs(plan, n, ctx + more)
    assert plus_one.keys() == base.keys() == longer.keys()
    for name, need in base.items():
        assert plus_one[name] >= need and longer[name] >= need, (name, n, ctx, more)


@given(
    model=st.sampled_from(MODELS),
    engine=st.sampled_from(ENGINES),
    d=st.integers(min_value=0, max_value=3),
    ctx=st.integers(min_value=1, max_value=131_072),
)
def test_more_draft_tokens_never_lower_a_requests_units(model: str, engine: str, d: int, ctx: int) -> None:
    # what one request takes, in each pool's own units (pages / blocks / slots); the pools' names may change with
    # the MTP layer (vLLM's group layers), so compare by position, the pools being listed in the same order
    fewer, more = _plan(model, engine, d), _plan(model, engine, d + 1)
    assert len(fewer.pools) == len(more.pools)
    for a, b in zip(fewer.pools, more.pools, strict=True):
        assert b.need(ctx) >= a.need(ctx), (a.name, b.name, d, ctx)

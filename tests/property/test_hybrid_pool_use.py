"""Issue 13's property over every hybrid preset on both engines: adding a request never lowers any pool's use.

Each pool check of ``admit`` is "N requests per DP rank × what one request takes from that pool ≤ capacity"
(kvplan.plan.admit, one ``pool: NAME`` check per pool of ``PoolPlan.pools``). For N + 1 requests of the same
context every pool's need is at least N's; for a longer context at the same N it is too (a window or a state never
shrinks as the request grows).
"""

from __future__ import annotations

from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from kvplan.engines.common import PoolPlan
from kvplan.plan.admit import Request, admit
from tests.conftest import make_plan

HYBRIDS = ("gpt-oss-120b", "qwen3-next-80b-a3b", "kimi-linear-48b-a3b", "deepseek-v4-flash", "deepseek-v4-pro",
           "glm-5.3-flash", "qwen3.6-27b")  # fmt: skip
ENGINES = ("sglang", "vllm")


@cache
def _plan(model: str, engine: str) -> PoolPlan:
    # the vLLM preset's max_model_len 524,288 is past gpt-oss's and Qwen3-Next's positions (vLLM would not
    # start): plan them at their own 131,072 / 262,144
    own = ("gpt-oss-120b", "qwen3-next-80b-a3b", "qwen3.6-27b")
    sets = {"context_length": 131072} if engine == "vllm" and model in own else {}
    return make_plan(f"glm-5.3-8xh200-{engine}", model, **sets)


def _pool_needs(plan: PoolPlan, n: int, ctx: int) -> dict[str, int]:
    a = admit(plan, Request(ctx_tokens=ctx, concurrent=n), remedies=False)
    return {c.name: c.need for c in a.checks if c.name.startswith("pool: ")}


@given(
    model=st.sampled_from(HYBRIDS),
    engine=st.sampled_from(ENGINES),
    n=st.integers(min_value=1, max_value=64),
    ctx=st.integers(min_value=1, max_value=131_072),
    more=st.integers(min_value=0, max_value=4096),
)
def test_adding_a_request_never_lowers_any_pools_use(model: str, engine: str, n: int, ctx: int, more: int) -> None:
    plan = _plan(model, engine)
    base = _pool_needs(plan, n, ctx)
    assert base, f"{model} on {engine} planned no pools"  # every hybrid plan has pools to check
    plus_one = _pool_needs(plan, n + 1, ctx)
    longer = _pool_needs(plan, n, ctx + more)
    assert plus_one.keys() == base.keys() == longer.keys()
    for name, need in base.items():
        assert plus_one[name] >= need, (name, n, ctx)
        assert longer[name] >= need, (name, n, ctx, more)

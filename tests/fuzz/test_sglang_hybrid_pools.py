"""Properties of SGLang's hybrid pools (kvplan/engines/sglang_hybrid.py, issue 13).

- the SWA split: both pools page-aligned, the SWA pool at most ratio × the full pool, the two pools' bytes within
  the budget, and a bigger budget never shrinks either pool;
- the Mamba split: (K + 1) state slots fit the mamba share of the budget, one more would not;
- what one request takes: a longer request never takes fewer units of any pool, a window never more than its
  window + eviction interval + 2 pages, a state the same slots whatever the context.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.sglang_hybrid import SWA_EVICTION_INTERVAL, mamba_cache_size, swa_pool_tokens
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import cdiv

_budget = st.integers(0, 200 * 2**30)
_cell = st.integers(1, 2_000_000)
_ratio = st.floats(0.01, 1.0)
_page = st.sampled_from([1, 16, 64, 128])


@given(_budget, _cell, _cell, _ratio, _page)
def test_swa_split_is_aligned_and_within_the_budget(available: int, full: int, swa: int, r: float, page: int) -> None:
    f, s = swa_pool_tokens(available, full_cell=full, swa_cell=swa, ratio=r, page=page)
    assert f % page == 0 and s % page == 0 and 0 <= s <= f * r
    assert f * full + s * swa <= available


@given(_budget, st.integers(0, 2**30), _cell, _cell, _ratio, _page)
def test_a_bigger_budget_never_shrinks_a_pool(
    available: int, more: int, full: int, swa: int, r: float, page: int
) -> None:
    a = swa_pool_tokens(available, full_cell=full, swa_cell=swa, ratio=r, page=page)
    b = swa_pool_tokens(available + more, full_cell=full, swa_cell=swa, ratio=r, page=page)
    assert b[0] >= a[0] and b[1] >= a[1]


@given(st.floats(0.01, 200.0), st.integers(1 << 10, 1 << 30), st.floats(0.05, 4.0))
def test_mamba_slots_fit_their_share(rest_gib: float, per: int, r: float) -> None:
    k = mamba_cache_size(rest_gib, per, r)
    share = rest_gib * r / (1 + r) * (1 << 30)
    if k >= 0:
        assert (k + 1) * per <= share < (k + 2) * per


_PLANS: dict[str, PoolPlan] = {}


def _gpt_oss(page: int) -> PoolPlan:
    key = f"gpt-oss/{page}"
    if key not in _PLANS:
        dep = load_deployment("glm-5.3-8xh200-sglang", ["weights_per_gpu=20GiB"])
        dep = replace(dep, model="gpt-oss-120b", kv_cache_dtype="auto", page_size=page)
        _PLANS[key] = plan_pool(load_model("gpt-oss-120b"), dep)
    return _PLANS[key]


@given(st.sampled_from([1, 64]), st.integers(0, 1 << 21), st.integers(0, 1 << 21))
def test_a_longer_request_never_takes_less(page: int, tokens: int, more: int) -> None:
    p = _gpt_oss(page)
    full, swa = p.pools
    assert full.need(tokens + more) >= full.need(tokens)
    assert swa.need(tokens + more) >= swa.need(tokens)
    # the window: at most window + eviction interval tokens, + a padding page and the next decode page
    assert swa.need(tokens + more) <= cdiv(128 + SWA_EVICTION_INTERVAL, page) + 2

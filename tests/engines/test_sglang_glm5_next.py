"""GLM-5.3-Flash on SGLang 0.5.23 (kvplan.engines.sglang_hybrid): KDA state slots + the DSA token pool of its MLA
layers.

SGLang's rules (the 0.5.23 wheel): ``configs/hybrid_arch.py glm5_next_config`` makes it a linear-attention hybrid;
``_handle_max_mamba_cache`` takes the state pool first (K = int((rest × 0.9 / 1.9 − per_req) // per_req), rest in
GiB); ``_build_hybrid_linear_kv_pool`` builds ``HybridLinearKVPool`` over ``DSATokenToKVPool`` on the 11 full layers
and ``DefaultPoolConfigurator._compute_cell_size`` charges calculate_mla_kv_cache_dim × 11 (fp8_e4m3 with
flashmla_kv on SM90: 512 + 512 / 128 × 4 + 0 rope = 528 B) + ceil(132 / index_kpool 4) = 33 B × 11 indexer layers;
``_deepseek_family_overrides`` sets page_size 64 × 4 = 256 over any --page-size; Glm5Next is in
``_MAMBA_EXTRA_BUFFER_ARCHS`` (3 + 2 tracking slots a request with the overlap scheduler and triton KDA).

Deployment glm-5.3-8xh200-sglang (H200, TP8, fp8_e4m3, page_size 64) with the glm-5.3-flash preset; the weights
are the preset's estimate, 40,612,166,968 B a GPU (tests/models/test_params_glm5_next.py).
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit

GiB = 1 << 30


@pytest.fixture(scope="module")
def plan():  # type: ignore[no-untyped-def]
    return plan_pool(load_model("glm-5.3-flash"), load_deployment("glm-5.3-8xh200-sglang"))


def test_cell_page_and_state(plan) -> None:  # type: ignore[no-untyped-def]
    # 528 B fp8_ds_mla rows (no rope) × 11 MLA layers + 33 B pooled index keys × 11 indexer layers
    assert (plan.cell.main_bytes, plan.cell.indexer_bytes, plan.cell.total_bytes) == (528 * 11, 33 * 11, 6_171)
    assert plan.page_tokens == 256  # 64 × index_kpool 4, over the deployment's page_size 64
    assert any('"Setting page size to 256 for DeepSeek DSA."' in n for n in plan.notes)
    state = next(p for p in plan.pools if p.unit == "slot")
    # KDA state of one request on one rank (tp 8: 64 / 8 = 8 heads): conv 3 × (8 × 128) × (4 − 1) bf16 = 18,432 B
    # + recurrent 8 × 128 × 128 fp32 = 524,288 B → 542,720 B × 34 KDA layers
    assert state.unit_bytes == 34 * (3 * 8 * 128 * 3 * 2 + 8 * 128 * 128 * 4) == 18_452_480
    assert state.demands[0].units == 5  # 3 + 2 extra-buffer tracking slots


def test_pool_sizes_golden(plan) -> None:  # type: ignore[no-untyped-def]
    # pre-load free = CUDA total 150,109,945,856 − 1 GiB runtime overhead; weights 40,612,166,968;
    # mem_fraction_static round((143,771 − 16,384) / 143,771, 3) = 0.886 → slack int(pre_load × 0.114)
    pre_load = 150_109_945_856 - GiB
    slack = int(pre_load * (1 - 0.886))
    assert slack == 16_990_127_259
    rest_gib = (pre_load - 40_612_166_968 - slack) / GiB  # 91,433,909,805 B = 85.155 GiB
    per = 18_452_480
    k = int((rest_gib * 0.9 / 1.9 * GiB - per) // per)  # (43,310,799,381 − 18,452,480) // 18,452,480
    assert k == plan.extras["max_mamba_cache_size"] == 2_346
    assert plan.extras["mamba_alloc_bytes"] == (k + 1) * per == 43_307_970_560
    available = int((rest_gib - (k + 1) * per / GiB) * GiB)  # SGLang subtracts in GiB floats
    assert abs(plan.available_bytes - available) <= 1
    # rows = available // 6,171 // 256 × 256 = 7,798,726 // 256 × 256
    assert plan.rows == plan.logged_tokens == 7_798_528
    assert plan.usable_pages == 30_463
    # running requests: min(clamp(int(7,798,528 / 1,048,576 × 512), 2048, 4096) = 3,807, rows // 2), capped by
    # max_mamba_cache_size 2,346 // 5 = 469
    assert plan.knob("max_running_requests").as_int() == 469
    assert any("pooled-index compress tails: 2 × 471 requests × 4 × 128 × 2 B × 11 indexer layers = 10,610,688 B"
               in n for n in plan.notes)  # fmt: skip


def test_128k_is_bound_by_token_pages(plan) -> None:  # type: ignore[no-untyped-def]
    r = admit(plan, Request(ctx_tokens=131_072))
    # 131,072 / 256 = 512 pages a request: 30,463 // 512 = 59 at once (the state slots would allow 2,346 // 5 = 469)
    assert r.admitted and r.max_concurrent == 59
    assert (r.need.pages, r.need.total_bytes) == (512, 512 * 256 * 6_171)


def test_4k_is_bound_by_state_slots(plan) -> None:  # type: ignore[no-untyped-def]
    r = admit(plan, Request(ctx_tokens=4_096))
    # 16 pages a request would allow 30,463 // 16 = 1,903; the state slots allow 2,346 // 5 = 469
    assert r.max_concurrent == 469
    many = admit(plan, Request(ctx_tokens=4_096, concurrent=1_000))
    assert not many.admitted  # 1,000 × 5 = 5,000 slots > 2,346
    assert many.binding.name == "pool: mamba state (34 layers)"
    assert (many.binding.need, many.binding.have) == (5_000, 2_346)

"""DeepSeek-V4 on SGLang 0.5.23 (kvplan.engines.sglang_dsv4) at the boundaries its mutants moved (issue 26).

Deployment as tests/engines/test_sglang_v4.py: H200 TP8, pre-load free 143,771 MiB, 20 GiB of weights; DeepSeek-V4-Flash
(43 layers: 21 C4, 20 C128), page 256 (``model_overrides/deepseek_v4.py``), max_running_requests 256
(``deepseek_v4_hook.apply_deepseek_v4_defaults``), context 1,048,576.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model


def _plan(model: str, **sets: object) -> PoolPlan:
    base = {"weights_per_gpu": "20GiB", "pre_load_free": "143771MiB", **sets}
    dep = load_deployment("glm-5.3-8xh200-sglang", [f"{k}={v}" for k, v in base.items()])
    return plan_pool(load_model(model), replace(dep, model=model))


def test_req_to_token_with_and_without_mtp() -> None:
    # ReqToTokenPool (memory_pool.py): (256 + 1) × (1,048,576 + extra) int32; allocation_sizing.py
    # get_req_to_token_extra_context_len: 4 without speculative decoding -> 257 × 1,048,580 × 4 = 1,077,940,240 B;
    # 3 draft tokens at page 256: max(4 + 3, 2 × max(2, 3) + 256 − 1) = 261 -> 257 × 1,048,837 × 4 = 1,078,204,436 B
    # (before: + 4 whatever the draft, 1,077,940,240 B)
    assert _plan("deepseek-v4-flash").extras["req_to_token_bytes"] == 1_077_940_240
    mtp = _plan("deepseek-v4-flash", speculative_num_draft_tokens=3)
    assert mtp.extras["req_to_token_bytes"] == 1_078_204_436


def test_flash_cell_and_indexer_allocation() -> None:
    # a full page (test_sglang_v4): 998,208 B, of which the indexer keys 64 × 132 × 21 C4 layers = 177,408 B;
    # per token: ceil(177,408 / 256) = 693 B of indexer, ceil(820,800 / 256) = 3,207 B of main KV;
    # indexer allocated: 60,871 full pages × 177,408 = 10,799,002,368 B; no MLA pool (V4 is MHA to SGLang)
    p = _plan("deepseek-v4-flash")
    assert (p.cell.main_bytes, p.cell.indexer_bytes) == (3_207, 693)
    assert p.extras["indexer_alloc_bytes"] == 10_799_002_368
    assert p.extras["mla_alloc_bytes"] == 0
    assert not [n for n in p.notes if "attention_backend" in n]  # none set, none overridden


def test_flash_chain_says_the_configurators_figures() -> None:
    # DSV4PoolConfigurator (test_sglang_v4): C128 state ceil(257 × 128 + 129, 128) × 128 rows × 2 × 512 × 4 B × 20;
    # bytes_per_full_token 0.1 × 8,160,000 / 256 + 998,208 / 256 = 0.1 × 31,875 + 3,899.25 = 7,086.75; the logged line
    # "DSV4 pool sizes: full=F, swa=S, c4=F//4, c128=F//128, c4_state=S//256×8, c128_state=0"
    chain = {t.label: t for t in _plan("deepseek-v4-flash").chain}
    c128 = chain["C128 compress-state pool"]
    assert (c128.bytes, c128.detail) == (
        2_715_811_840,
        "ceil((256 + 1) × 128 + 129, 128) × 128 rows × 2 × 512 × 4 B × 20 layers, fixed bytes taken before the token "
        "pools",
    )
    assert chain["cell"].detail == (
        "bytes_per_full_token 7,086.75 = (0.1 × 31,875.00 (SWA + C4 state) + 3,899.25 (C4 KV + indexer, C128 KV))"
    )
    assert chain["pool rows per GPU"].detail == (
        "15,582,976 = int((available − C128 state) / 7,086.75) // 256 × 256 (full); "
        "SWA 1,558,272 = int(full × 0.1) // 256 × 256"
    )
    assert chain["logged max_total_num_tokens"].detail == (
        "DSV4 pool sizes: full=15582976, swa=1558272, c4=3895744, c128=121742, c4_state=48696, c128_state=0"
    )


def test_flash_mtp_allocation_includes_the_draft_worker() -> None:
    # MTP 4 (test_hybrid_spec_deepseek_v4): 53,004 full pages × 998,208 + 5,300 SWA pages × 9,880,320 (16-row C4
    # rings) + C128 state 5,421,137,920 (256-row rings) = 110,695,850,752 B, + the draft worker's share
    # int(F × b) − int(F × b / (44 / 43)) with b = 7,939.186... and F = 13,569,024: 2,448,341,046 B
    p = _plan("deepseek-v4-flash", speculative_num_draft_tokens=4)
    assert p.extras["draft_alloc_bytes"] == 2_448_341_046
    assert p.allocated_bytes == 110_695_850_752 + 2_448_341_046


def test_a_pool_of_one_page_halves_the_running_requests() -> None:
    # resolve_max_num_reqs: min(256, rows // 2): weights that leave 2,718,511,839 B: (2,718,511,839 − 2,715,811,840)
    # / 7,086.75 = 380.99 -> 256 rows, so 128 running requests (and an SWA pool of 0 tokens, SGLang's refusal)
    p = _plan("deepseek-v4-flash", weights_per_gpu="131905542506B", mem_fraction_static=0.893)
    assert (p.available_bytes, p.rows, p.max_running_requests) == (2_718_511_839, 256, 128)
    assert (
        p.knob("max_running_requests").origin == "default: 256 (apply_deepseek_v4_defaults); reduced to rows // 2 = 128"
    )
    assert p.startup_error is not None and p.startup_error.startswith("SWA pool (0 tokens) cannot hold")


def test_a_compress_ratio_sglang_does_not_size_is_named() -> None:
    # DSV4PoolConfigurator sizes ratios 0, 4 and 128 only (collect_sources_by_ratio); a layer of ratio 2 is refused,
    # the ratio named
    arch = load_model("deepseek-v4-flash")
    layer = arch.layers[2]
    odd = replace(
        layer, caches=tuple(replace(c, compress_ratio=2) if c is layer.compressed else c for c in layer.caches)
    )
    arch = replace(arch, layers=(*arch.layers[:2], odd, *arch.layers[3:]))
    dep = load_deployment("glm-5.3-8xh200-sglang", ["weights_per_gpu=20GiB"])
    with pytest.raises(PlanError, match=r"DeepSeek-V4 compress ratios \[2\] \(0, 4, 128 only\)"):
        plan_pool(arch, replace(dep, model="deepseek-v4-flash"))


def test_dcp_alone_is_refused_with_the_figures() -> None:
    # DSV4PoolConfigurator's pools under decode context parallelism are not planned: dcp 2 at pp 1 is refused on its
    # own (pp > 1 is refused before, by the pipeline check), one line naming both
    with pytest.raises(PlanError, match=r"^kvplan does not yet plan DeepSeek-V4 with dcp 2 / pp 1 \(deepseek-v4"):
        _plan("deepseek-v4-flash", dcp=2)


def test_dp_attention_divides_the_running_requests() -> None:
    # resolve_max_num_reqs: requested_per_worker = max(1, 256 // attn_dp_size) = 256 // 8 = 32
    # (apply_deepseek_v4_defaults sets the 256); the C128 state ring is sized for (32 + 1) × 128 = 4,224 rows
    p = _plan("deepseek-v4-flash", dp_attention=8)
    assert (p.max_running_requests, p.extras["c128_state_rows"]) == (32, 4_224)


def test_memory_map_main_kv_holds_the_swa_and_state_pools() -> None:
    # what DSV4PoolConfigurator allocates besides the indexer keys: 60,871 full pages × (998,208 − 177,408 indexer)
    # = 49,962,916,800 B of C4 / C128 KV, 1,558,272 // 256 = 6,087 SWA pages × 31,875 × 256 = 8,160,000 B
    # (test_flash_chain: SWA + C4 state a token) = 49,669,920,000 B, the C128 state 2,715,811,840 B
    # -> 102,348,648,640 B; the indexer 10,799,002,368 B apart (test_flash_cell_and_indexer_allocation)
    segments = {s.label: s.bytes for s in _plan("deepseek-v4-flash").memory_map}
    assert (segments["main KV"], segments["indexer"]) == (102_348_648_640, 10_799_002_368)


def _plan_with(**fields: object) -> PoolPlan:
    # fields the preset cannot unset (page_size None, kv_cache_dtype auto), set on the Deployment itself
    dep = load_deployment("glm-5.3-8xh200-sglang", ["weights_per_gpu=20GiB", "pre_load_free=143771MiB"])
    return plan_pool(load_model("deepseek-v4-flash"), replace(dep, model="deepseek-v4-flash", **fields))


def _overrides(p: PoolPlan) -> list[str]:
    return [n for n in p.notes if n.startswith("SGLang sets")]


def test_page_override_is_said_only_over_another_page() -> None:
    # model_overrides/deepseek_v4.py sets page_size = 256 over any --page-size: a page of 64 given is overridden
    # (said, with the 64), 256 given or none given is not
    page_note = (
        "SGLang sets page_size to 256 for DeepseekV4ForCausalLM (model_overrides/deepseek_v4.py) over the "
        "deployment's 64"
    )
    assert _overrides(_plan_with(page_size=64)) == [page_note]
    assert _overrides(_plan_with(page_size=256)) == []
    assert _overrides(_plan_with(page_size=None)) == []


def test_backend_override_is_said_only_over_another_backend() -> None:
    # arg_groups/model_overrides/deepseek_v4.py sets attention_backend "dsv4": flashmla given is overridden (said),
    # dsv4 or none given is not
    said = _overrides(_plan_with(page_size=256, attention_backend="flashmla"))
    assert said == ["SGLang sets attention_backend dsv4 for DeepseekV4ForCausalLM over flashmla"]
    assert _overrides(_plan_with(page_size=256, attention_backend="dsv4")) == []
    assert _overrides(_plan_with(page_size=256, attention_backend=None)) == []


def test_kv_dtype_auto_becomes_fp8_and_bfloat16_is_kept() -> None:
    # overrides._deepseek_v4_kv_cache_dtype: auto -> fp8_e4m3; fp8_e4m3 and bfloat16 are accepted as given
    def knob(p: PoolPlan) -> tuple[object, str]:
        k = next(k for k in p.knobs if k.name == "kv_cache_dtype")
        return k.value, k.origin

    assert knob(_plan_with(kv_cache_dtype="auto")) == (
        "fp8_e4m3",
        "default: auto -> fp8_e4m3 for DeepseekV4ForCausalLM",
    )
    assert knob(_plan_with(kv_cache_dtype="bfloat16")) == ("bfloat16", "set")


def test_running_requests_floor_at_one_per_dp_rank() -> None:
    # resolve_max_num_reqs: requested_per_worker = max(1, max_running_requests // attn_dp_size): 1 // 1 = 1 and
    # 4 // 8 = 0 -> 1; the C128 state ring (finalize_with_max_running_requests) holds (1 + 1) × 128 = 256 rows
    for sets in ({"max_running_requests": 1}, {"max_running_requests": 4, "dp_attention": 8}):
        p = _plan("deepseek-v4-flash", **sets)
        assert (p.max_running_requests, p.extras["c128_state_rows"]) == (1, 256)


def test_flash_pools_demands_and_running_requests_origin() -> None:
    # the SWA pool keeps each request's window: V4-Flash's sliding_window 128 (config.json) +
    # SGLANG_SWA_EVICTION_INTERVAL 128 (environ.py EnvInt(128)) = 256 tokens before eviction frees them
    p = _plan("deepseek-v4-flash")
    _full, swa, c128 = p.pools
    assert swa.demands[0].window == 256
    # the C128 compress state is one ring a running request (finalize_with_max_running_requests): slots of one,
    # 256 of them (apply_deepseek_v4_defaults), not pages
    assert (c128.page_tokens, c128.capacity) == (1, 256)
    # 256 running requests fit 60,871 pages' rows // 2 (resolve_max_num_reqs): the knob is not "reduced"
    mrr = next(k for k in p.knobs if k.name == "max_running_requests")
    assert (mrr.value, mrr.origin) == (256, "default: 256 (apply_deepseek_v4_defaults)")
    # the weights given (20 GiB = 21,474,836,480 B) are the map's weights, not another segment's bytes
    assert next(s.bytes for s in p.memory_map if s.label == "weights") == 21_474_836_480


def test_flash_with_mtp_says_the_draft_inflation_and_the_ring_pad() -> None:
    # 3 draft tokens: the C4 ring grows to 16 rows (get_compress_state_ring_size); get_compress_state_write_pad:
    # 16 − C4 window (2 × 4 = 8) + 2 = 10 draft tokens served; bytes_per_full_token × (43 + 1) / 43 for the draft worker
    p = _plan("deepseek-v4-flash", speculative_num_draft_tokens=3)
    cell = next(t.detail for t in p.chain if t.label == "cell")
    assert cell.endswith(" × (43 + 1) / 43 (the draft worker)")
    (note,) = [n for n in p.notes if n.startswith("speculative decoding")]
    assert "rings grow to 16 (C4) and 256 (C128) rows (get_compress_state_ring_size), serving at most 10 draft" in note

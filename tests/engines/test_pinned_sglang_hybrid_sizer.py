"""SGLang 0.5.23's hybrid sizing steps (kvplan.engines.sglang_hybrid_sizer), each figure worked by hand (issue 26).

The state: Qwen3-Next's Gated DeltaNet layer (32 value heads, 16 key heads of 128, head_v 128, conv kernel 4):
conv_dim = 2 × 16 × 128 + 32 × 128 = 8,192; conv state 3 × 8,192 bf16 = 49,152 B; recurrent 32 × 128 × 128 float32
= 2,097,152 B (``Mamba2StateShape.create``, ``mamba2_state_dtype``): 2,146,304 B a layer, × 36 linear layers =
77,266,944 B a request on one rank. Sources: ``server_args`` / ``arg_groups`` ``_handle_max_mamba_cache`` (auto-size,
"Joint solve: main_state + intermediate = mamba_budget"), ``_calculate_mamba_ratio``, ``mem_cache/memory_pool.py``
``MambaPool`` (intermediate_ssm_state_cache, intermediate_conv_window), ``HybridSWAPoolConfigurator``,
``MemoryPoolConfigurator.validate_swa_pool_size``.
"""

from __future__ import annotations

import pytest

from kvplan.engines.common import Knob
from kvplan.engines.sglang_hybrid_sizer import (
    HybridSizer,
    mamba_cache_size,
    mamba_cache_size_spec,
    mamba_slots_per_request,
    swa_pool_error,
    swa_pool_tokens,
)
from kvplan.engines.sglang_swa_cap import SwaRequestCap
from kvplan.models.cache import LinearState, SlidingWindow

GDN = LinearState("gated_deltanet", 32, 16, 128, 128, 4)
PER = 77_266_944  # 2,146,304 B × 36 layers
MIB_100 = 100 * 2**20


def _sizer(**kw: object) -> HybridSizer:
    base: dict[str, object] = {"full_layers": 12, "state": GDN, "state_layers": 36, "slots_per_request": 5}
    return HybridSizer(**{**base, **kw})  # type: ignore[arg-type]


def test_slots_per_request() -> None:
    # _calculate_mamba_ratio: 3 base slots + 2 tracking (1 without overlap, 0 without the extra buffer); no radix: 1
    assert (mamba_slots_per_request(), mamba_slots_per_request(overlap=False)) == (5, 4)
    assert (mamba_slots_per_request(extra_buffer=False), mamba_slots_per_request(radix_cache=False)) == (3, 1)


def test_mamba_cache_auto_size() -> None:
    # 19 GiB × 0.9 / 1.9 = 9 GiB = 9,663,676,416 B; (9,663,676,416 − 104,857,600) // 104,857,600 = 91
    assert mamba_cache_size(19.0, MIB_100) == 91
    # with 4 draft tokens, 5 slots a request: (9,663,676,416 − 5 × 104,857,600) // (104,857,600 × 1.8) = 48
    assert mamba_cache_size_spec(19.0, MIB_100, 4, 5) == 48


def test_swa_pool_tokens() -> None:
    # 10^9 // (36,864 + 0.8 × 36,864 = 66,355.2) = 15,070 full tokens, int(0.8 × 15,070) = 12,056 SWA tokens;
    # page 64: 15,070 // 64 × 64 = 15,040 and int(12,032) // 64 × 64 = 12,032
    assert swa_pool_tokens(10**9, full_cell=36_864, swa_cell=36_864, ratio=0.8, page=1) == (15_070, 12_056)
    assert swa_pool_tokens(10**9, full_cell=36_864, swa_cell=36_864, ratio=0.8, page=64) == (15_040, 12_032)


def test_swa_pool_floor() -> None:
    # the admission floor is window + page: 128 + 64 = 192 SWA tokens do not hold one request, 193 do
    assert swa_pool_error(193, 128, 64) is None
    assert swa_pool_error(192, 128, 64) == (
        "SWA pool (192 tokens) cannot hold even one request: the prefill admission floor is sliding_window_size "
        "(128) + page_size (64). Increase --swa-full-tokens-ratio or the total KV budget."
    )


def test_speculative_state_buffers() -> None:
    s = _sizer(draft_tokens=4, spec_running=48)
    assert s.state_bytes_per_request(1) == PER
    # capped_reqs = min(max(1, 48), 300 // 5 = 60) = 48; min(48, 100 // 5 = 20) = 20
    assert (s.spec_requests(300), s.spec_requests(100)) == (48, 20)
    # reserved: per_req × (48 + 1) × 4 = 15,144,321,024 B
    assert s.spec_reserved_bytes(300, 1) == 15_144_321_024
    # MambaPool: rows = 36 layers × 49 = 1,764; ssm 1,764 × 4 × 524,288 × 4 B = 14,797,504,512;
    # conv window deduplicated: 4 + 3 − 1 = 6 columns × 8,192 × 2 B × 1,764 = 173,408,256 -> 14,970,912,768
    assert s.spec_alloc_bytes(300, 1) == 14_970_912_768
    # not deduplicated: 4 × 3 = 12 columns: conv 346,816,512 -> 15,144,321,024
    assert _sizer(draft_tokens=4, spec_running=48, dedup_conv=False).spec_alloc_bytes(300, 1) == 15_144_321_024
    # the pool: (300 + 1) × 77,266,944 = 23,257,350,144 + the buffers
    assert s.state_alloc_bytes(300, 1) == 23_257_350_144 + 14_970_912_768


def test_no_speculative_buffers_without_draft_tokens() -> None:
    s = _sizer()
    assert (s.spec_reserved_bytes(300, 1), s.spec_alloc_bytes(300, 1)) == (0, 0)
    assert s.state_alloc_bytes(300, 1) == 301 * PER


def test_take_state_with_speculative_decoding() -> None:
    # budget 100 GiB × 0.9 / 1.9 = 50,861,454,821.05 B; K = (budget − 5 × 77,266,944) // (77,266,944 × 1.8) = 362;
    # reserved 15,144,321,024 B = 14.104248046875 GiB -> 85.895751953125 GiB; less (362 + 1) × per = 26.12... GiB
    left, k, err = _sizer(draft_tokens=4, spec_running=48).take_state(100.0, 1)
    assert (k, err) == (362, None)
    assert left == pytest.approx(59.77410888671875)
    # without: K = (budget − per) // per = 657; 100 − 658 × per / 2^30
    left, k, err = _sizer().take_state(100.0, 1)
    assert (k, err) == (657, None)
    assert left == pytest.approx(100 - 658 * PER / 2**30)


def test_take_state_with_no_room_says_the_figures() -> None:
    # 0.1 GiB: K = int((0.1 × 0.9 / 1.9 GiB − per) // per) = int((50,861,454.8 − 77,266,944) // 77,266,944) = -1
    left, k, err = _sizer().take_state(0.1, 1)
    assert (left, k) == (0.1, 0)
    assert err == (
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=-1 "
        "(total_rest_memory=0.10 GB, mamba_cache_per_req=73.69 MB)"
    )


def test_take_state_with_an_explicit_cache_of_zero_and_one() -> None:
    # --max-mamba-cache-size 0: "Not enough GPU memory ..." (K <= 0); 1 slot is served: 100 − 2 × per GiB left
    left, k, err = _sizer(max_mamba_cache_size=0).take_state(100.0, 1)
    assert (k, err is not None and "Computed max_mamba_cache_size=0 " in err) == (0, True)
    left, k, err = _sizer(max_mamba_cache_size=1).take_state(100.0, 1)
    assert (k, err) == (1, None)
    assert left == pytest.approx(100 - 2 * PER / 2**30)


def test_swa_cell_over_every_swa_layer() -> None:
    # SWAKVPool: 8 kv heads × (128 + 128) × 2 B = 4,096 B a token on one SWA layer, × 3 layers = 12,288 B;
    # its buffers hold swa_tokens + page rows: (1,000 + 64) × 12,288 = 13,074,432 B; no SWA layer: nothing
    swa = _sizer(swa=SlidingWindow(8, 128, 128, 64, window=4_096), swa_layers=3)
    assert swa.swa_cell("bfloat16", 1) == 12_288
    assert swa.swa_alloc_bytes(1_000, "bfloat16", 1, 64) == 13_074_432
    assert (_sizer().swa_cell("bfloat16", 1), _sizer().swa_alloc_bytes(0, "bfloat16", 1, 64)) == (0, 0)


def test_cap_note_of_no_running_request_is_sglangs_error() -> None:
    # kv_cache_configurator.py resolve_max_num_reqs (0.5.23 wheel): mamba_cap = max_mamba_cache_size // ratio =
    # 4 // 5 = 0, max_num_reqs = min(2048, 0) = 0 <= 0 -> RuntimeError with both figures
    knob = Knob("max_running_requests", 2048, "default")
    assert _sizer().cap_note(knob, 0, 0, 4)[2] == (
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. max_mamba_cache_size=4, "
        "mamba_ratio=5, resulting max_num_reqs=0."
    )
    # one slot-set more (5 // 5 = 1): served, capped to 1 (1 < 2048)
    assert _sizer().cap_note(knob, 1, 1, 5)[2] is None


def test_cap_note_at_a_state_cap_equal_to_the_running_requests() -> None:
    # resolve_max_num_reqs warns "max_running_requests is capped to %d by the mamba state cache" only when
    # mamba_cap < max_num_reqs. With speculative decoding the 48 (_handle_eagle_family: "Max running requests is
    # reset to 48") is max_num_reqs; 240 slots // 5 = 48 is not below it: no warning, the knob is the 48
    default = Knob("max_running_requests", 2048, "default")
    knob, said, err = _sizer(draft_tokens=4, spec_running=48).cap_note(default, 48, 48, 240)
    assert (knob.as_int(), said, err) == (48, [], None)
    assert knob.origin.startswith("default: 48 // dp with speculative decoding")
    # 239 slots // 5 = 47 < 48: capped, with SGLang's figures
    knob, said, _ = _sizer(draft_tokens=4, spec_running=48).cap_note(default, 47, 47, 239)
    assert said == ["max_running_requests is capped to 47 by the mamba state cache (max_mamba_cache_size=239, "
                    "5 state slots per request)"]  # fmt: skip
    # without speculative decoding max_num_reqs is the estimate (2048): 48 < 2048 caps it, whatever spec_running is
    knob, said, _ = _sizer(spec_running=48).cap_note(default, 48, 48, 240)
    assert (knob.as_int(), said) == (48, [
        "max_running_requests is capped to 48 by the mamba state cache (max_mamba_cache_size=240, 5 state slots "
        "per request)"
    ])  # fmt: skip


def test_a_sizer_over_no_layers_of_a_kind_holds_none_of_it() -> None:
    # mamba_cache_per_req sums the state over the linear layers and SWAKVPool's buffers span the SWA layers: a sizer
    # given the kinds but no layers of them (Dsv4Sizer's defaults) weighs 0 B of either
    bare = HybridSizer(full_layers=12, state=GDN, swa=SlidingWindow(8, 128, 128, 64, window=4_096))
    assert (bare.state_bytes_per_request(1), bare.swa_cell("bfloat16", 1)) == (0, 0)


def test_swa_tokens_under_a_max_total_tokens_cap() -> None:
    # HybridSWAPoolConfigurator._solve_pool_sizes (mem_cache/kv_cache_configurator.py) via
    # calculate_pool_sizes_from_max_tokens: swa = align_page_size(int(full × ratio)) = (x // page) × page.
    # full 15,040 at page 64, ratio 0.8: int(12,032.0) // 64 × 64 = 12,032; full 1,000: int(800.0) // 64 × 64 = 768
    swa = _sizer(swa=SlidingWindow(8, 128, 128, 64, window=4_096), swa_layers=3)
    assert (swa.swa_tokens_for(15_040, 64), swa.swa_tokens_for(1_000, 64)) == (12_032, 768)
    # no SWA layer: no SWA pool
    assert _sizer().swa_tokens_for(15_040, 64) == 0


def test_pool_tokens_of_a_state_hybrid_and_a_swa_hybrid() -> None:
    # DefaultPoolConfigurator.calculate_pool_sizes: available // cell // page × page; 10^9 // 36,864 = 27,126 ->
    # page 64: 423 × 64 = 27,072 (the state pool was taken out before); a cell of 0 B sizes nothing here
    assert _sizer().pool_tokens(10**9, 36_864, "bfloat16", 1, 64) == (27_072, 0)
    assert _sizer().pool_tokens(10**9, 0, "bfloat16", 1, 64) == (0, 0)
    # SWA: cell 36,864 + 0.8 × 12,288 (8 heads × 256 × 2 B × 3 layers) = 46,694.4 B; 10^9 // 46,694.4 = 21,415
    # -> 21,376 at page 64; int(0.8 × 21,376 = 17,100.8) = 17,100 // 64 × 64 = 17,088
    swa = _sizer(swa=SlidingWindow(8, 128, 128, 64, window=4_096), swa_layers=3)
    assert swa.pool_tokens(10**9, 36_864, "bfloat16", 1, 64) == (21_376, 17_088)


def test_running_cap_from_the_state_slots() -> None:
    # resolve_max_num_reqs: mamba_cap = max_mamba_cache_size // mamba_ratio: 362 // 5 = 72; with speculative
    # decoding _handle_eagle_family's 48 is the lower bound (min(72, 48) = 48), and 239 // 5 = 47 below it
    assert (_sizer().running_cap(362), _sizer().running_cap(364), _sizer().running_cap(365)) == (72, 72, 73)
    spec = _sizer(draft_tokens=4, spec_running=48)
    assert (spec.running_cap(362), spec.running_cap(239)) == (48, 47)
    # no state pool: nothing caps the running requests here
    assert HybridSizer(full_layers=12).running_cap(362) is None


def test_check_swa_pool_only_for_the_ratio_sized_pool() -> None:
    # validate_swa_pool_size: window 4,096 + page 64 = 4,160 tokens is the floor; SWARequestCapPoolConfigurator
    # does not call it, and a model without SWA layers has no SWA pool to check
    window = SlidingWindow(8, 128, 128, 64, window=4_096)
    swa = _sizer(swa=window, swa_layers=3)
    assert swa.check_swa_pool(4_161, 64) is None
    err = swa.check_swa_pool(4_160, 64)
    assert err is not None and err.startswith("SWA pool (4160 tokens) cannot hold even one request")
    capped = _sizer(swa=window, swa_layers=3, swa_cap=SwaRequestCap(window=4_096, eviction_interval=128, running=1,
                                                                    chunk=8_192))  # fmt: skip
    assert (capped.check_swa_pool(4_160, 64), _sizer().check_swa_pool(0, 64)) == (None, None)


def test_a_sizer_without_state_takes_nothing_and_a_cap_at_the_knob_says_nothing() -> None:
    # no linear layer: no MambaPool, the rest is untouched and max_mamba_cache_size is 0
    plain = HybridSizer(full_layers=12)
    assert (plain.state_bytes_per_request(1), plain.state_alloc_bytes(300, 1)) == (0, 0)
    assert plain.take_state(100.0, 1) == (100.0, 0, None)
    # _handle_max_mamba_cache capped_reqs = min(max(1, max_running_requests // dp), K // ratio): 0 // dp -> 1
    assert _sizer(draft_tokens=4, spec_running=0).spec_requests(300) == 1
    # resolve_max_num_reqs warns only when mamba_cap < max_num_reqs: a set 48 with a cap of 48 is kept as set
    knob = Knob("max_running_requests", 48, "set")
    assert _sizer().cap_note(knob, 48, 48, 240) == (knob, [], None)

"""kvplan/engines/sglang_swa_cap.py pinned on SGLang 0.5.23's own code (mutation check seed 64727: 11 survivors).

sglang 0.5.23 wheel, srt/model_executor/pool_configurator.py:
- ``compute_swa_request_cap``: eviction_interval = max(1, SGLANG_SWA_EVICTION_INTERVAL); trailing = window +
  eviction_interval × 1 + page; per_request = trailing + page; num_reqs = max(1, max_running_requests //
  attn_dp_size); cap = per_request × num_reqs + 2 × chunked_prefill_size + page (overlap scheduler on).
- ``SWARequestCapPoolConfigurator.is_applicable``: max_running_requests given, radix cache disabled,
  chunked_prefill_size > 0, a sliding window, ``len(full_attention_layer_ids) > 0``.
- chunked_prefill_size unset: ``ServerArgs._handle_gpu_memory_settings`` by GPU memory: 8,192 under 160 GiB
  (an H200's 143,771 MiB), 16,384 from 160 GiB.
"""

from __future__ import annotations

from kvplan.engines.sglang_swa_cap import SwaRequestCap, request_cap_for
from kvplan.models.deployment import load_deployment
from tests.engines.test_sglang_radix_knobs import _plan

H200 = "glm-5.3-8xh200-sglang"


def test_an_eviction_interval_under_one_counts_as_one() -> None:
    # page 1, window 8: 8 + max(1, 0) + 1 + 1 = 11 a request; 11 × 1 + 2 × 16 + 1 = 44
    assert SwaRequestCap(window=8, eviction_interval=0, running=1, chunk=16).tokens(1) == 44
    assert SwaRequestCap(window=8, eviction_interval=1, running=1, chunk=16).tokens(1) == 44
    assert SwaRequestCap(window=8, eviction_interval=2, running=1, chunk=16).tokens(1) == 45


def test_is_applicable_needs_each_of_its_conditions() -> None:
    cap = SwaRequestCap(window=8, eviction_interval=4, running=1, chunk=1)  # the smallest positive chunk
    assert cap.applies(radix_disabled=True, full_layers=1)
    assert not cap.applies(radix_disabled=False, full_layers=1)  # the radix cache on: the ratio configurator
    assert not cap.applies(radix_disabled=True, full_layers=0)  # no full-attention layer
    no_chunk = SwaRequestCap(window=8, eviction_interval=4, running=1, chunk=0)
    assert not no_chunk.applies(radix_disabled=True, full_layers=1)  # chunked_prefill_size <= 0


def _cap(*sets: str) -> SwaRequestCap | None:
    dep = load_deployment(H200, ("disable_radix_cache=true", *sets))
    return request_cap_for(dep, window=128, eviction_interval=128, full_layers=18)


def test_the_default_chunk_is_the_one_of_the_gpus_memory() -> None:
    cap = _cap("max_running_requests=64")
    assert cap is not None and cap.chunk == 8_192  # H200: 143,771 MiB < 160 GiB
    assert cap.running == 64


def test_the_running_requests_are_per_attention_dp_rank_and_at_least_one() -> None:
    eight = _cap("max_running_requests=64", "dp_attention=8")
    assert eight is not None and eight.running == 8  # 64 // 8
    few = _cap("max_running_requests=4", "dp_attention=8")
    assert few is not None and few.running == 1  # max(1, 4 // 8 = 0)
    assert _cap() is None  # max_running_requests not given: not applicable


def test_a_cap_that_leaves_no_room_sizes_no_full_pool() -> None:
    # calculate_pool_sizes: full = int((available − swa × swa_cell) // full_cell) // page × page; at or under 0 SGLang
    # stops ("SWA pool cap (...) leaves no room for the full KV pool"): never a full pool of one token.
    # The cap (its doctest): (8 + 4 + 4 + 4) × 2 + 2 × 16 + 4 = 76 SWA tokens × 100 B = 7,600 B
    cap = SwaRequestCap(window=8, eviction_interval=4, running=2, chunk=16)
    assert cap.pool_tokens(7_600, full_cell=50, swa_cell=100, page=4) == (0, 76)
    assert cap.pool_tokens(7_000, full_cell=50, swa_cell=100, page=4) == (0, 76)
    # 200 B more: 200 // 50 = 4 tokens, one page of 4
    assert cap.pool_tokens(7_800, full_cell=50, swa_cell=100, page=4) == (4, 76)


def test_the_rows_line_of_a_request_capped_plan() -> None:
    # gpt-oss-120b on SGLang at tp 4 with --disable-radix-cache, 16 running requests, chunk 8,192, page 64:
    # compute_swa_request_cap = (128 window + 128 + 64 + 64) × 16 + 2 × 8,192 + 64 = 22,592 SWA tokens;
    # an SWA token over 18 sliding layers: 8 kv heads / 4 = 2 × (64 + 64) × 2 B × 18 = 9,216 B (as a full token)
    p = _plan("gpt-oss-120b", "disable_radix_cache=true", "max_running_requests=16", "chunked_prefill_size=8192")
    assert (p.extras["swa_tokens"], p.cell.total_bytes) == (22_592, 9_216)
    rows = next(t.detail for t in p.chain if t.label == "pool rows per GPU")
    assert rows == f"{p.rows:,} = int((available − 22,592 × 9,216 B) // 9,216) // 64 × 64 (full_layer_tokens)"

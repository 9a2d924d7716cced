"""DeepSeek-V4's pool shapes on SGLang 0.5.23 (kvplan.engines.sglang_dsv4_shape), every term worked by hand on a
two-layer stage (one c4 layer, one c128 layer, head_dim 512 = 448 nope + 64 rope, index_head_dim 128, page 256), so
that a term dropped or a ring moved changes a figure (issue 26).

SGLang ``model_executor/pool_configurator.py`` ``DSV4PoolConfigurator``: ``KVLayout.V4.page_bytes`` = ceil(tokens ×
584 / 576) × 576; ``_get_bytes_per_swa_token`` (V4 page on every layer + the c4 compress-state ring of 8 rows × 2 × 2
× (head_dim + index_head_dim) × 4 B, float32 ``SGLANG_DSV4_COMPRESS_STATE_DTYPE``); ``_compressed_bytes_per_full_token``
(c4: a V4 page of 64 + 64 indexer keys of 128 + 4 B; c128: a V4 page of 2); ``_get_c128_state_fixed_bytes``;
``calculate_pool_sizes`` (ratio mode); ``get_compress_state_write_pad`` (ring − window + 2).
"""

from __future__ import annotations

import pytest

from kvplan.engines.sglang_dsv4_shape import (
    SPEC_COMPRESS_RING,
    Dsv4Shape,
    compress_state_write_pad,
    dsv4_indexer_bytes,
    dsv4_pool_tokens,
    v4_page_bytes,
)
from tests.engines.test_sglang_v4 import _plan

SHAPE = Dsv4Shape(layers=2, c4_layers=1, c128_layers=1, head_dim=512, index_head_dim=128, window=128)


def test_v4_pages_and_indexer_keys() -> None:
    # 256 × 584 = 149,504 -> ceil(/ 576) = 260 -> 149,760; 64 × 584 = 37,376 -> 65 × 576 = 37,440; 2 × 584 = 1,168
    # -> 3 × 576 = 1,728; an fp8 indexer key of 128 + 128 / 128 × 4 B scale = 132 B
    assert (v4_page_bytes(256), v4_page_bytes(64), v4_page_bytes(2)) == (149_760, 37_440, 1_728)
    assert dsv4_indexer_bytes(128) == 132


def test_page_bytes_by_pool() -> None:
    # SWA page: 149,760 × 2 layers + 8 rows × 2 × 2 × (512 + 128) × 4 B = 81,920 on the c4 layer -> 381,440
    # c4 page: a V4 page of 64 compressed tokens 37,440 + 64 × 132 = 8,448 -> 45,888; c128 page: 1,728
    assert SHAPE.swa_page_bytes == 381_440
    assert (SHAPE.c4_page_bytes, SHAPE.c128_page_bytes, SHAPE.full_page_bytes) == (45_888, 1_728, 47_616)


def test_bytes_per_full_token() -> None:
    # swa: 149,760 / 256 × 2 + 8 / 256 × 10,240 × 1 = 1,170 + 320 = 1,490 B a SWA token
    # c4: 1/4 × 37,440 / 64 + 1/4 × 132 = 146.25 + 33 = 179.25; c128: 1/128 × 1,728 / 2 = 6.75
    # ratio 0.1: 0.1 × 1,490 + 179.25 + 6.75 = 335.0; with MTP's (layers + 1) / layers = 3/2: 502.5
    assert SHAPE.bytes_per_full_token(0.1) == pytest.approx(335.0)
    spec = Dsv4Shape(layers=2, c4_layers=1, c128_layers=1, head_dim=512, index_head_dim=128, window=128, spec_infl=1.5)
    assert spec.bytes_per_full_token(0.1) == pytest.approx(502.5)
    # no c128 layer: 0.1 × 1,490 + 179.25 = 328.25; no c4 layer (and so no c4 ring): 0.1 × 1,170 + 6.75 = 123.75
    c4_only = Dsv4Shape(layers=2, c4_layers=1, c128_layers=0, head_dim=512, index_head_dim=128, window=128)
    c128_only = Dsv4Shape(layers=2, c4_layers=0, c128_layers=1, head_dim=512, index_head_dim=128, window=128)
    assert c4_only.bytes_per_full_token(0.1) == pytest.approx(328.25)
    assert c128_only.bytes_per_full_token(0.1) == pytest.approx(123.75)


def test_c128_state() -> None:
    # one request's ring: 128 rows × 2 × 512 × 4 B = 524,288 B; the fixed pool for 256 requests:
    # ceil((257 × 128 + 128 + 1) / 128) = ceil(33,025 / 128) = 259 blocks -> 33,152 rows × 4,096 B = 135,790,592 B
    assert SHAPE.c128_state_slot_bytes() == 524_288
    assert SHAPE.c128_state_fixed_bytes(256) == 135_790_592
    two = Dsv4Shape(layers=4, c4_layers=2, c128_layers=2, head_dim=512, index_head_dim=128, window=128)
    assert two.c128_state_fixed_bytes(256) == 2 * 135_790_592


def test_pool_tokens_in_ratio_mode() -> None:
    # (10,000,000,000 − 135,790,592) / 335 = 29,445,401.2 -> 29,445,401 // 256 × 256 = 29,445,376 full tokens;
    # SWA: int(29,445,376 × 0.1) = 2,944,537 // 256 × 256 = 2,944,512
    assert dsv4_pool_tokens(10**10, SHAPE, ratio=0.1, max_running_requests=256) == (29_445_376, 2_944_512)
    # less than the fixed c128 state: nothing left for tokens
    assert dsv4_pool_tokens(100_000_000, SHAPE, ratio=0.1, max_running_requests=256) == (0, 0)


@pytest.mark.parametrize(
    ("ratio", "ring", "pad"),
    [
        (4, 16, 10),  # speculative C4 ring: 16 − 8 + 2
        (128, 256, 130),  # speculative C128 ring: 256 − 128 + 2
        (4, 8, 0),  # a plain C4 ring serves no draft token
        (128, 128, 0),
        (4, 9, 3),  # one row over the window: 9 − 8 + 2
    ],
)
def test_compress_state_write_pad(ratio: int, ring: int, pad: int) -> None:
    assert compress_state_write_pad(ratio, ring) == pad


def test_speculative_rings() -> None:
    # get_compress_state_ring_size with speculative decoding: "return 16 if compress_ratio == 4 else 256"
    assert SPEC_COMPRESS_RING == {4: 16, 128: 256}


def test_capped_full_pool_takes_a_tenth_for_swa() -> None:
    # --max-total-tokens 1,000,000 under the profiled 15,582,976 (test_sglang_v4.test_flash_pools_golden):
    # DSV4PoolConfigurator.calculate_pool_sizes_from_max_tokens sizes the full pool 1,000,000 // 256 × 256 = 999,936
    # and _get_swa_tokens takes int(999,936 × swa_full_tokens_ratio 0.1) = 99,993 // 256 × 256 = 99,840 SWA tokens
    p = _plan("deepseek-v4-flash", max_total_tokens=1_000_000)
    assert (p.rows, p.extras["swa_tokens"]) == (999_936, 99_840)

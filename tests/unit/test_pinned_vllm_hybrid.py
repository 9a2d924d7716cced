"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/vllm_hybrid.py, each
pinned by a figure derived from vLLM's source (vllm/v1/core/kv_cache_utils.py and kv_cache_planning.py)."""

from __future__ import annotations

import pytest

from tests.unit.test_vllm_hybrid import plan


def test_no_length_fits_estimates_zero() -> None:
    # kv_cache_utils.py _estimate_max_model_len_from_groups: `if not fits(1): return 0` ("Returns 0 if even 1
    # token doesn't fit"). gpt-oss-120b TP1: bytes per block 589,824 (test_vllm_hybrid); one token takes a full
    # block + a window's cdiv(min(127 + 16,384, 1), 16) + 1 = 2 blocks = 3 × 589,824 = 1,769,472 B; the check has
    # 1 MiB − one block = 1,048,576 − 589,824 = 458,752 B
    p = plan("gpt-oss-120b", tp=1, context_length=131_072, kv_cache_memory="1MiB")
    assert p.startup_error is not None
    assert "the estimated maximum model length is 0." in p.startup_error


@pytest.mark.parametrize("blocks", [*range(101, 105), 3_639, *range(5_130, 5_134)])
def test_estimated_length_is_the_longest_that_fits(blocks: int) -> None:
    # _estimate_max_model_len_from_groups binary-searches the largest L with bytes_per_block × blocks(L) <= the
    # check; gpt-oss-120b TP1 (589,824 B a block): blocks(L) = cdiv(L, 16) full + cdiv(min(127 + 16,384, L), 16)
    # + 1 window. With `blocks` B in the check (kv memory = B + 1 blocks, the null block reserved first):
    # L <= 16,511: 2 × cdiv(L, 16) + 1 <= B -> L = 16 × ((B - 1) // 2); past it cdiv(L, 16) + 1,033 <= B ->
    # L = 16 × (B - 1,033). From B = 5,130 (L 65,552) a search that skips mid + 1 stops one token short
    p = plan("gpt-oss-120b", tp=1, context_length=131_072, kv_cache_memory=f"{(blocks + 1) * 589_824}B")
    longest = 16 * (blocks - 1_033) if blocks - 1_033 > 16_511 // 16 else 16 * ((blocks - 1) // 2)
    assert p.startup_error is not None
    assert f"the estimated maximum model length is {longest}." in p.startup_error

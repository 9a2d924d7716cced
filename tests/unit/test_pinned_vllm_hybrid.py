"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/vllm_hybrid.py, each
pinned by a figure derived from vLLM's source (vllm/v1/core/kv_cache_utils.py and kv_cache_planning.py)."""

from __future__ import annotations

from tests.unit.test_vllm_hybrid import plan


def test_no_length_fits_estimates_zero() -> None:
    # kv_cache_utils.py _estimate_max_model_len_from_groups: `if not fits(1): return 0` ("Returns 0 if even 1
    # token doesn't fit"). gpt-oss-120b TP1: bytes per block 589,824 (test_vllm_hybrid); one token takes a full
    # block + a window's cdiv(min(127 + 16,384, 1), 16) + 1 = 2 blocks = 3 × 589,824 = 1,769,472 B; the check has
    # 1 MiB − one block = 1,048,576 − 589,824 = 458,752 B
    p = plan("gpt-oss-120b", tp=1, context_length=131_072, kv_cache_memory="1MiB")
    assert p.startup_error is not None
    assert "the estimated maximum model length is 0." in p.startup_error

"""From the 'GPU KV cache size' a vLLM hybrid start logs back to the blocks of its shared pool.

A hybrid's logged tokens are not num_blocks × block (``kvplan.engines.vllm_hybrid.HybridBlocks.kv_cache_size_tokens``):
before 0.20.1 they are num_blocks // groups × block (``_report_kv_cache_config``), so the remainder of the division
is lost; from 0.20.1 int(num_blocks / blocks a request × max_model_len) (``get_kv_cache_capacity``). Each maps a
range of num_blocks to one logged figure: the doctor divides the log's KV budget by that range, not by one guess.
"""

from __future__ import annotations

from kvplan.units import cdiv
from kvplan.versions import TOKENS_FROM_CONCURRENCY_SINCE, parse_version


def blocks_for_logged_tokens(
    tokens: int, *, version: str, groups: int, block: int, blocks_per_request: int, max_model_len: int
) -> tuple[int, int]:
    """The (fewest, most) num_blocks (null block included) whose logged 'GPU KV cache size' is ``tokens``."""
    if parse_version(version) < TOKENS_FROM_CONCURRENCY_SINCE:
        # tokens = num_blocks // groups × block: num_blocks in [tokens // block × groups, that + groups - 1]
        low = tokens // block * groups
        return low, low + groups - 1
    # tokens = int(num_blocks / R × L): num_blocks / R × L in [tokens, tokens + 1)
    low = cdiv(tokens * blocks_per_request, max_model_len)
    high = cdiv((tokens + 1) * blocks_per_request, max_model_len) - 1
    return low, max(low, high)

"""kvplan/engines/vllm_hybrid_log.py against the engine's own map, by brute force (mutation check, seed 18510:
the 0.20.1 branch's upper end survived; the one log case, vllm#28228's, has a single num_blocks per figure).

vLLM from 0.20.1 logs a hybrid's 'GPU KV cache size' as ``int(num_blocks / blocks_per_request × max_model_len)``
(v1/core/kv_cache_utils.py ``get_kv_cache_capacity``); before, ``num_blocks // groups × block``
(``_report_kv_cache_config``). The inverse must return every num_blocks that logs the figure, and no other.
"""

from __future__ import annotations

import itertools

from kvplan.engines.vllm_hybrid_log import blocks_for_logged_tokens


def _logged(n: int, version: str, groups: int, block: int, per_request: int, max_model_len: int) -> int:
    if version == "0.20.1":
        return int(n / per_request * max_model_len)  # get_kv_cache_capacity
    return n // groups * block  # _report_kv_cache_config


def test_the_range_is_exactly_the_preimage_of_the_logged_figure() -> None:
    for version, groups, block, per_request, max_model_len in itertools.product(
        ("0.20.1", "0.11.1"), (1, 4), (16, 960), (1, 3, 7, 128), (2, 5, 960, 120_000)
    ):
        logged = {n: _logged(n, version, groups, block, per_request, max_model_len) for n in range(0, 400)}
        for tokens in sorted(set(logged.values()))[1:-1]:  # figures whose whole preimage lies in 0 .. 399
            preimage = [n for n, t in logged.items() if t == tokens]
            got = blocks_for_logged_tokens(
                tokens,
                version=version,
                groups=groups,
                block=block,
                blocks_per_request=per_request,
                max_model_len=max_model_len,
            )
            assert got == (preimage[0], preimage[-1]), (version, groups, block, per_request, max_model_len, tokens)


def test_several_block_counts_log_one_figure_when_a_request_takes_more_blocks_than_tokens() -> None:
    # int(n / 3 × 2) = 10 for n in [15, 16.5): num_blocks 15 and 16
    got = blocks_for_logged_tokens(10, version="0.20.1", groups=1, block=16, blocks_per_request=3, max_model_len=2)
    assert got == (15, 16)

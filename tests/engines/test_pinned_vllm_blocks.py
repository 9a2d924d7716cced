"""kvplan.engines.vllm_blocks pinned: the shared block pool's arithmetic, each rule against vLLM's source
(mutation check).

Engine source read (vllm-project/vllm):
- ``v1/core/kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size``: group_size = the smallest bucket, or the
  largest when ``max_num_layers < min_num_layers * 1.5``; "Add %d padding layers, may waste at most %.2f%% KV
  cache memory" with num_padding_layers = group_size - len(layers) % group_size, / len(layers) * 100;
- ``_approximate_gcd``: the d in [max(1, lower_bound), max(values)] of least Σ (d - x % d) % d, ties to the larger
  d; ``min_d`` itself when it exceeds max(values);
- ``get_kv_cache_config_from_groups``: one block id is a page in each layer of a group: group_size × page bytes;
  ``get_max_concurrency_for_kv_cache_config`` / ``get_kv_cache_capacity``: int(num_blocks / blocks per request ×
  max_model_len) from 0.20.1, num_blocks // len(groups) × block before (``_report_kv_cache_config``, 0.20.0);
- ``_estimate_max_model_len_from_groups``: the binary search for the longest length whose blocks fit;
- ``VllmConfig.max_in_flight_tokens`` (0.26.0 on): max_concurrent_batches × max_num_batched_tokens, 2 batches
  with async scheduling at pp 1.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.common import Demand, Knob
from kvplan.engines.vllm_blocks import (
    Group,
    HybridBlocks,
    approximate_gcd,
    group_size_of,
    max_in_flight_tokens,
    padding_note,
)
from kvplan.models.deployment import load_deployment

# A hybrid of 12 full-attention layers and 36 state layers in groups of 12 (1 attention group, 3 state groups of
# 2 blocks a request each in 'align' mode), 64-token blocks of 1,000 B a token a layer.
POOL = HybridBlocks(
    block=64,
    block_knob=Knob("page_size", 64, "set"),
    page_bytes=64 * 1_000,
    attn_bytes_per_token=1_000,
    state_bytes=50_000,
    group_size=12,
    groups=(
        Group("full attention", 12, 1, Demand("full attention", "token", units=1)),
        Group("GDN", 36, 3, Demand("GDN", "request", units=6)),
    ),
    mamba_cache_mode="align",
    notes=(),
)


def test_a_block_id_spans_a_page_in_every_layer_of_a_group() -> None:
    assert POOL.bytes_per_block == 12 * 64_000 == 768_000
    assert POOL.num_groups == 4
    # 1,000 tokens: cdiv(1,000, 64) = 16 attention blocks + 3 groups × 2 state blocks = 22
    assert POOL.blocks_per_request(1_000) == 22


@pytest.mark.parametrize(
    ("version", "tokens"),
    [
        ("0.20.0", 1_000 // 4 * 64),  # num_blocks // 4 groups × 64 = 16,000
        ("0.20.1", 45_454),  # int(1,000 / 22 × 1,000) = int(45,454.5...)
    ],
)
def test_kv_cache_size_log_figure(version: str, tokens: int) -> None:
    assert POOL.kv_cache_size_tokens(1_000, 1_000, version) == tokens


@pytest.mark.parametrize("blocks", [6, 7, 8, 21, 22, 23, 38, 39])
def test_estimated_max_len_is_the_longest_that_fits(blocks: int) -> None:
    # a budget of `blocks` block ids: 6 go to the state groups, the rest hold (blocks - 6) × 64 tokens of
    # attention; 6 alone fit no token (fits(1) needs 7); the search stops at max_model_len 2,048
    want = min(max(blocks - 6, 0) * 64, 2_048)
    assert POOL.estimated_max_len(768_000 * blocks, 2_048) == want
    # one byte short of the budget: one block fewer
    if blocks > 6:
        assert POOL.estimated_max_len(768_000 * blocks - 1, 2_048) == min((blocks - 7) * 64, 2_048)


def test_describe_says_what_a_request_takes() -> None:
    pool = HybridBlocks(
        block=64,
        block_knob=Knob("page_size", 64, "set"),
        page_bytes=64_000,
        attn_bytes_per_token=1_000,
        state_bytes=50_000,
        group_size=12,
        groups=(
            Group("sliding window", 12, 1, Demand("sliding window", "window", window=4_096, extra=1)),
            Group("GDN", 12, 1, Demand("GDN", "request", units=2)),
        ),
        mamba_cache_mode="align",
        notes=(),
    )
    assert POOL.describe() == (
        "1 × full attention group (12 layers): cdiv(tokens, 64) blocks per group",
        "3 × GDN groups (36 layers): 2 blocks per group whatever the length (align)",
    )
    assert pool.describe() == (
        "1 × sliding window group (12 layers): cdiv(min(tokens, 4,096), 64) + 1 blocks per group",
        "1 × GDN group (12 layers): 2 blocks per group whatever the length (align)",
    )


@pytest.mark.parametrize(("counts", "size"), [([12, 17], 17), ([12, 18], 12), ([12, 36], 12), ([13, 12], 13)])
def test_group_size(counts: list[int], size: int) -> None:
    # 17 < 12 × 1.5 = 18: the largest; 18 is not: the smallest
    assert group_size_of(counts) == size


def test_padding_note() -> None:
    # 13 layers in groups of 12: 12 - 13 % 12 = 11 padding layers, 11 / 13 × 100 = 84.62 %
    assert padding_note("full attention", 13, 12) == (
        "vLLM: Add 11 padding layers, may waste at most 84.62% KV cache memory (full attention: 13 layers in groups"
        " of 12)"
    )
    assert padding_note("GDN", 36, 12) is None  # 12 - 0 = 12: no padding


@pytest.mark.parametrize(
    ("values", "lower_bound", "d"),
    [
        ([43, 21, 20], 21, 22),  # d 21: 20 + 0 + 1 = 21; d 22: 1 + 1 + 2 = 4; d 23: 3 + 2 + 3 = 8
        ([4, 4], 1, 4),  # d 1, 2 and 4 pad nothing: ties to the larger, 4
        ([3, 5], 0, 1),  # min_d = max(1, 0) = 1, which pads nothing
        ([3], 5, 5),  # min_d 5 > max 3: min_d
    ],
)
def test_approximate_gcd(values: list[int], lower_bound: int, d: int) -> None:
    assert approximate_gcd(values, lower_bound) == d


@pytest.mark.parametrize(("version", "tokens"), [("0.25.0", 8_192), ("0.26.0", 2 * 8_192)])
def test_max_in_flight_tokens(version: str, tokens: int) -> None:
    # 0.26.0 sizes a window with max_in_flight_tokens: 2 batches (async scheduling, on by default, at pp 1)
    dep = load_deployment("glm-5.3-8xh200-vllm", [f"engine_version={version}"])
    assert max_in_flight_tokens(dep, 8_192) == tokens


def test_block_detail_names_the_figures() -> None:
    assert POOL.block_detail() == "group size 12 × page 64,000 B (64 tokens)"


def test_estimated_max_len_is_1_when_only_one_token_fits() -> None:
    # _estimate_max_model_len_from_groups (v1/core/kv_cache_utils.py): ``left, right = 1, original_max``; ``if not
    # fits(left): return 0``; ``result = 1``, then the binary search. With 1-token blocks (ROCM_AITER_MLA's kernel
    # block, or --block-size 1) POOL's layout needs 1 attention block + 6 state blocks for one token and 8 for two:
    # a budget of 7 block ids holds one token, not two, so the estimate is 1 (not 0, which would mean none fits)
    pool = replace(POOL, block=1, page_bytes=1_000)
    assert pool.bytes_per_block == 12_000
    assert pool.blocks_per_request(1) == 7 and pool.blocks_per_request(2) == 8
    assert pool.estimated_max_len(7 * 12_000, 2_048) == 1
    assert pool.estimated_max_len(7 * 12_000 - 1, 2_048) == 0


def test_describe_says_groups_from_two() -> None:
    # 24 state layers in groups of 12: cdiv(24, 12) = 2 KV cache groups of the bucket, said in the plural; 6 state
    # blocks a request over the 2 groups: 3 a group
    pool = replace(POOL, groups=(Group("GDN", 24, 2, Demand("GDN", "request", units=6)),))
    assert pool.describe() == ("2 × GDN groups (24 layers): 3 blocks per group whatever the length (align)",)

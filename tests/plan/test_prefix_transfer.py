"""Prefix-hit economics and transfer sizes, derived by hand."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.plan.prefix import pairs, prefix_hit, reusable
from kvplan.plan.transfer import parse_link, transfer
from kvplan.units import GB
from tests.conftest import make_plan

M = 1 << 20


def test_100k_hit_in_a_1m_request() -> None:
    # R = 100,000 // 64 × 64 = 99,968 tokens = 1,562 pages; S = 1,048,576 − 99,968 = 948,608
    h = prefix_hit(make_plan(), M, 100_000)
    assert (h.reusable_tokens, h.pages, h.suffix_tokens) == (99_968, 1_562, 948_608)
    # main KV not written: 99,968 × 51,168 = 5,115,162,624 B; indexer: 99,968 × 2,772 = 277,111,296 B
    assert h.main_bytes_saved == 5_115_162_624
    assert h.indexer_bytes_saved == 277_111_296
    # pairs: all = 1,048,576 × 1,048,577 / 2 = 549,756,338,176; saved = 99,968 × 99,969 / 2 = 4,996,850,496
    assert h.pairs_total == 549_756_338_176
    assert h.pairs_saved == 4_996_850_496
    # still paid: S × R = 948,608 × 99,968 = 94,830,444,544; S(S + 1)/2 = 449,929,043,136
    assert (h.pairs_cross, h.pairs_suffix) == (94_830_444_544, 449_929_043_136)
    # really saved: 4,996,850,496 / 549,756,338,176 = 0.909 % (ppm 9,089) vs the naive 100,000 / 1,048,576 = 9.54 %
    assert (h.saved_ppm, h.naive_ppm) == (9_089, 95_367)
    # FLOPs per pair per indexer layer: 32 heads × 128 × 2 = 8,192; × 21 indexer layers
    assert h.flops(1) == 8_192 * 21


def test_keys_read_per_suffix_chunk() -> None:
    # suffix 948,608 in 8,192-token chunks: cdiv = 116; the first chunk scores 99,968 + 8,192 = 108,160 keys,
    # the last all 1,048,576; each key costs 132 B × 21 layers = 2,772 B of indexer K to read
    h = prefix_hit(make_plan(), M, 100_000)
    keys = h.keys_read_by_chunk()
    assert h.suffix_chunks == len(keys) == 116
    assert (keys[0], keys[-1]) == (108_160, M)
    assert h.indexer_k_bytes_per_key == 2_772


@pytest.mark.parametrize(
    ("engine", "eagle", "lookahead", "expected"),
    [
        ("sglang", False, True, 960),  # min(1,000, 999) // 64 × 64
        ("sglang", True, True, 960),  # bigram: 999 units -> 960
        ("vllm", False, True, 960),  # capped at L − 1 = 999 -> 960
        ("vllm", True, True, 960),  # lookahead hashes: no drop
        ("vllm", True, False, 896),  # lookahead off: one 64-token block dropped
    ],
)
def test_reusable_rules(engine: str, eagle: bool, lookahead: bool, expected: int) -> None:
    p = make_plan(f"glm-5.3-8xh200-{engine}", context_length="128K")
    assert reusable(p, 1000, 1000, eagle=eagle, lookahead=lookahead)[0] == expected


def test_sglang_dcp_pages_are_wider() -> None:
    # dcp 8: radix pages of 64 × 8 = 512 tokens: 100,000 // 512 × 512 = 99,840
    assert reusable(make_plan(dcp=8), M, 100_000)[0] == 99_840


@pytest.mark.parametrize(("ctx", "hit"), [(100, 101), (0, 0), (-5, 0), (100, -1)])
def test_prefix_bad_input(ctx: int, hit: int) -> None:
    with pytest.raises(InputError):
        prefix_hit(make_plan(), ctx, hit)


def test_offloading_connector_recipe_893() -> None:
    # vLLM recipes PR #893 (GLM-5.3 FP8, 8×H200 TP8): the offloading connector stored whole 256-token chunks:
    # 138,615 // 256 = 541 chunks = 138,496 tokens × 53,940 B × 8 ranks = 59,763,793,920 B
    p = make_plan("glm-5.3-8xh200-vllm")
    t = transfer(p, 138_615, unit="chunk:256")
    assert (t.moved_tokens, t.total_bytes) == (138_496, 59_763_793_920)
    # 44,498 // 256 = 173 chunks = 44,288 tokens × 53,940 × 8 = 19,111,157,760 B
    assert transfer(p, 44_498, unit="chunk:256").total_bytes == 19_111_157_760


def test_pd_handoff_moves_whole_pages() -> None:
    # 1,000 tokens -> 16 pages = 1,024 rows × 53,940 B = 55,234,560 B per rank
    t = transfer(make_plan(), 1000)
    assert t.bytes_per_rank == 1024 * 53_940
    # 400 Gbps = 50,000,000,000 B/s -> 55,234,560 B take 1,105 µs (rounded up)
    assert t.link_bytes_per_s == 50 * GB
    assert t.microseconds(t.bytes_per_rank) == 1_105


@pytest.mark.parametrize(
    ("text", "expected"),
    [("400Gbps", 50 * GB), ("50GB/s", 50 * GB), ("1.6Tbps", 200 * GB), ("46.5GiB/s", 49_928_994_816)],
)
def test_link_speeds(text: str, expected: int) -> None:
    assert parse_link(text) == expected


@pytest.mark.parametrize("text", ["400", "400 furlongs", "0Gbps"])
def test_bad_link_speeds(text: str) -> None:
    with pytest.raises(InputError):
        parse_link(text)


def test_bad_unit() -> None:
    with pytest.raises(InputError):
        transfer(make_plan(), 1000, unit="blocks")


def test_pairs() -> None:
    assert [pairs(n) for n in (0, 1, 2, 3)] == [0, 1, 3, 6]


def test_the_sweep_is_bounded_by_max_loop() -> None:
    # Regression: `kvplan prefix --sweep 1000000` planned 1,000,001 prefix hits (it hung); the sweep is one of
    # the loops kvplan.limits.MAX_LOOP (10,000) bounds. 10,000 steps give 10,001 points, 0 and ctx included.
    from kvplan.limits import MAX_LOOP, LimitError
    from kvplan.plan.prefix import sweep_points

    assert MAX_LOOP == 10_000
    points = sweep_points(1 << 20, MAX_LOOP)
    assert len(points) == 10_001 and (points[0], points[-1]) == (0, 1 << 20)
    with pytest.raises(LimitError, match=r"--sweep.*MAX_LOOP.*10,000"):
        sweep_points(1 << 20, MAX_LOOP + 1)
    # the low end (mutation survivors `steps <= 0` -> `< 0` / `<= 1`, seed 3): one step is the two ends, and
    # zero is refused by its own message, not by the MAX_LOOP bound's
    assert sweep_points(1000, 1) == (0, 1000)
    with pytest.raises(InputError, match="--sweep must be positive, got 0"):
        sweep_points(1000, 0)


def test_prefix_sweep_past_the_limit_is_exit_2_at_once() -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner(env={"KVPLAN_FORMAT": None}).invoke(app, ["prefix", "--ctx", "1M", "--sweep", "1000000"])
    assert r.exit_code == 2
    assert r.stderr.startswith("kvplan: error: --sweep") and "10,000" in r.stderr and r.stdout == ""

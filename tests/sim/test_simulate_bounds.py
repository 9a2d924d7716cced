"""`kvplan simulate`'s numeric options are bounded before any work (issue 10): no hang, no MemoryError, no
400-digit capacity printed back. Each case names the defect; the limits are kvplan.limits'."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import limits
from kvplan.errors import InputError
from kvplan.sim.run import CapacityScale, parse_capacity, parse_count, parse_sweep
from tests.sim.test_sim_cli import fail, invoke

TRACE = '{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [0, 1]}\n'


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text(TRACE * 3)
    return p


ENGINE = ("--semantics", "sglang", "--capacity", "1M")
OCC = (*ENGINE, "--occupancy")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # --points 1,000,000 replayed a million capacities; MAX_LOOP = 10,000
        (
            ["--sweep", "1e4..1e7", "--points", "1000000"],
            "--points: 1000000 is above the largest value kvplan accepts (10,000)",
        ),
        (["--sweep", "1e4..1e7", "--points", "1"], "--points: 1 is below 2"),
        # --max-running -1 hung the occupancy loop, 0 ran it out of memory
        ([*OCC, "--max-running", "-1"], "--max-running: -1 is below 1"),
        ([*OCC, "--max-running", "0"], "--max-running: 0 is below 1"),
        # --tpot-ms nan / inf reached round() (a traceback)
        ([*OCC, "--tpot-ms", "nan"], "--tpot-ms: nan is not a finite number"),
        ([*OCC, "--tpot-ms", "inf"], "--tpot-ms: inf is not a finite number"),
        ([*OCC, "--tpot-ms", "0"], "--tpot-ms: 0.0 must be above 0"),
        ([*OCC, "--prefill-tps", "0"], "--prefill-tps: 0 is below 1"),
        # --page-tokens 0 was accepted as "the plan's page"
        (["--semantics", "sglang", "--capacity", "1M", "--page-tokens", "0"], "--page-tokens: 0 is below 1"),
        # --jobs -1 was accepted
        (["--semantics", "sglang", "--sweep", "1e5..1e6", "--jobs", "-1"], "--jobs: -1 is below 1"),
        (["--semantics", "sglang", "--sweep", "1e5..1e6", "--jobs", "0"], "--jobs: 0 is below 1"),
        # --sweep 1e4..1e400 overflowed math.log (a traceback)
        (["--sweep", "1e4..1e400"], "--sweep '1e400' is above the largest count kvplan accepts (1,099,511,627,776)"),
        # --capacity 1e400 was accepted and printed as a 398-digit number
        (["--capacity", "1e400"], "capacity '1e400' is above the largest count kvplan accepts"),
        (["--capacity", "9" * 5000], "a number of more than 30 digits"),
        # a capacity past what kvplan represents (MAX_TOKENS = 2**40 tokens) is refused for every pool; below it
        # the vLLM pool builds nothing up front (test_sim_blockpool.test_a_huge_pool_builds_nothing)
        (["--semantics", "vllm", "--capacity", "2e12"], "capacity '2e12'"),
        (["--semantics", "vllm", "--sweep", "1e5..2e12"], "--sweep '2e12'"),
    ],
)
def test_bad_numbers_exit_2_with_one_line(trace: Path, args: list[str], needle: str) -> None:
    fail(invoke(trace, *args), 2, needle)


def test_parse_count_bounds() -> None:
    # MAX_TOKENS = 2**40 = 1,099,511,627,776: 1e12 is below it, 2e12 above
    assert parse_count("1e12") == 10**12
    assert parse_count(str(limits.MAX_TOKENS)) == limits.MAX_TOKENS
    with pytest.raises(limits.LimitError, match="1099511627777 is above"):
        parse_count(str(limits.MAX_TOKENS + 1))
    with pytest.raises(limits.LimitError):
        parse_count("2e12")
    with pytest.raises(limits.LimitError, match="above the largest count"):
        parse_count("1e999999")  # refused from its exponent, never expanded


def test_capacity_in_pages_and_bytes_is_bounded() -> None:
    scale = CapacityScale(64, "page", bytes_per_token_num=1)
    assert parse_capacity("6000 pages", scale) == 6000
    with pytest.raises(limits.LimitError):
        parse_capacity("2e12 pages", scale)
    # 1 byte a token: 2,000 TB = 2 × 10**15 tokens > MAX_TOKENS (about 1.1 × 10**12)
    with pytest.raises(limits.LimitError, match="in tokens"):
        parse_capacity("2000TB", scale)


def test_sweep_list_length_is_bounded() -> None:
    scale = CapacityScale(64, "page")
    many = ",".join(str(64 * (i + 1)) for i in range(limits.MAX_LOOP + 1))
    with pytest.raises(InputError, match="the number of capacities: 10001 is above"):
        parse_sweep(many, scale)


def test_good_occupancy_run_still_works(trace: Path) -> None:
    # the bounds leave ordinary values alone: 3 requests, max-running 1, 1 ms a token
    r = invoke(trace, *OCC, "--max-running", "1", "--tpot-ms", "1", "--page-tokens", "64", "--format", "json")
    assert r.exit_code == 0, r.stderr

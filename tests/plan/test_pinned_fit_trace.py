"""plan/fit_trace.py pinned (issue 26): the trace's longest request counts its output, the figures the lacks and
stop lines print (non-round shares, request 0), a candidate not replayed reports nothing replayed, the headroom."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kvplan.errors import InputError
from kvplan.plan.fit_trace import TraceFit, check_trace, trace_spec
from kvplan.sim.ranks import Stop
from kvplan.sim.trace import open_trace
from tests.plan.test_fit_trace import SMALL, plan, spec_for, write_trace


def test_the_longest_request_counts_its_output(tmp_path: Path) -> None:
    # every candidate must admit the longest request's input + output: r0 100 + 300 = 400 > r1 350 + 0
    rows = [
        {"arrival_s": 0.0, "input_tokens": 100, "output_tokens": 300, "blocks": [1, 2]},
        {"arrival_s": 0.5, "input_tokens": 350, "output_tokens": 0, "blocks": [3, 4, 5, 6, 7, 8]},
    ]
    assert spec_for(write_trace(tmp_path / "t.jsonl", rows)).longest_tokens == 400


def test_a_trace_of_empty_requests_is_bad_input(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.jsonl", [{"arrival_s": 0.0, "input_tokens": 0, "output_tokens": 0, "blocks": []}])
    with pytest.raises(InputError, match=r"every request is empty \(0 input and 0 output tokens\)"):
        spec_for(path)


def test_the_service_model_as_printed(tmp_path: Path) -> None:
    # the default service model of the module docstring: 10,000 prefill tokens/s, 40,000 µs = 40 ms a decode token
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL))
    assert (spec.prefill_tps, spec.tpot_us) == (10_000, 40_000)
    assert spec.service_text().startswith("prefill 10,000 tokens/s per request (uncached tokens), decode 40 ms a token")


def test_a_bound_share_that_is_not_round(tmp_path: Path) -> None:
    # SMALL and r3 (64 fresh tokens, block 7): prompt 256 + 256 + 128 + 64 = 704; the reuse bound on one rank is
    # still r1's and r2's blocks 1 2 = 256 tokens: 256 / 704 = 36.36 % (cap 363,636 ppm) < --min-hit 0.455
    rows = [*SMALL, {"arrival_s": 2.0, "input_tokens": 64, "output_tokens": 0, "blocks": [7]}]
    t = check_trace(plan(pages=6), spec_for(write_trace(tmp_path / "t.jsonl", rows), min_hit=0.455))  # type: ignore[arg-type]
    assert (t.bound_tokens, t.prompt_tokens) == (256, 704)
    assert t.lacks == (
        "trace: hit rate at most 36.4% < 45.5% on 1 rank (the trace's own reuse, even with unbounded pools)",
    )
    # not replayed: nothing replayed is reported
    replayed = (t.peak_held_pages, t.peak_running, t.waited, t.preemptions, t.dropped, t.hit_tokens, t.rank_requests)
    assert replayed == (0, 0, 0, 0, 0, 0, ())


def test_request_0_too_long_is_named(tmp_path: Path) -> None:
    # 512 tokens = 8 pages of 64 > a 6-page pool: the first request (index 0, line 2 after the header) stops it
    rows = [{"arrival_s": 0.0, "input_tokens": 512, "output_tokens": 0, "blocks": [1, 2, 3, 4, 5, 6, 7, 8]}]
    t = check_trace(plan(pages=6), spec_for(write_trace(tmp_path / "t.jsonl", rows)))  # type: ignore[arg-type]
    assert t.lacks == (
        "trace: not held: request 0 (line 2) is too long for one rank's pool at 0.0 s on rank 0 (0 of 6 pages held, "
        "0 of 8 running: pool pages bind)",
    )


def test_headroom_at_the_peak(tmp_path: Path) -> None:
    # SMALL peaks at 6 pages (r0's 4 + r1's 2 new): an 8-page pool keeps 2 / 8 = 250,000 ppm at the peak
    t = check_trace(plan(pages=8), spec_for(write_trace(tmp_path / "t.jsonl", SMALL)))  # type: ignore[arg-type]
    assert (t.peak_held_pages, t.headroom_ppm) == (6, 250_000)
    # a 1-page pool never touched keeps all of it
    one = TraceFit(engine="sglang", router="round_robin", ranks=1, pool_pages=1, page_tokens=64, max_running=8,
                   eagle=False, min_hit_ppm=0)  # fmt: skip
    assert one.headroom_ppm == 1_000_000


def _fit(**fields: object) -> TraceFit:
    base: dict[str, object] = {"engine": "sglang", "router": "round_robin", "ranks": 1, "pool_pages": 100,
                               "page_tokens": 64, "max_running": 8, "eagle": False, "min_hit_ppm": 500_000}  # fmt: skip
    return TraceFit(**{**base, **fields})  # type: ignore[arg-type]


def test_the_shares_print_rounded_to_a_tenth_of_a_percent() -> None:
    # a bound of 729 hit tokens of 2,000: 364,500 ppm = 36.45 % -> "36.5%" (the cap is floored to the ppm first)
    t = _fit(bound_tokens=729, prompt_tokens=2_000)
    assert t.lacks == (
        "trace: hit rate at most 36.5% < 50.0% on 1 rank (the trace's own reuse, even with unbounded pools)",
    )
    # held, 400 of 1,000 tokens hit against --min-hit 0.45449: 454,490 ppm = 45.449 % -> "45.4%"
    t = _fit(hit_tokens=400, prompt_tokens=1_000, min_hit_ppm=454_490)
    assert t.holds and t.lacks == ("trace: hit rate 40.0% < 45.4%",)
    assert not t.ok  # held, but short of --min-hit: not ok


# Fresh seed 8221 (issue 26): the figures its survivors moved.

# Two DP ranks, round-robin (SGLang's default DP router: r0 r2 r4 on rank 0, r1 r3 on rank 1), 64-token blocks
# and pages, the default service model (10,000 prefill tokens/s: a 64-token prompt runs 6.4 ms, a 256-token one
# 25.6 ms; 0 output tokens, so a request finishes when its prefill does):
#   r0 t = 0      256 tokens, blocks 1-4 -> rank 0, runs to 25.6 ms, 4 pages
#   r1 t = 5 ms    64 tokens, block 9    -> rank 1, runs to 11.4 ms
#   r2 t = 10 ms   64 tokens, block 10   -> rank 0 while r0 runs: 2 running on rank 0 (4 + 1 pages)
#   r3 t = 15 ms   64 tokens, block 11   -> rank 1 (r1 done): never more than 1 running on rank 1
#   r4 t = 20 ms  128 tokens, blocks 12 13 -> rank 0 (r2 done at 16.4 ms): needs 2 pages beside r0's 4
TWO_RANKS = [
    {"arrival_s": 0.0, "input_tokens": 256, "output_tokens": 0, "blocks": [1, 2, 3, 4]},
    {"arrival_s": 0.005, "input_tokens": 64, "output_tokens": 0, "blocks": [9]},
    {"arrival_s": 0.01, "input_tokens": 64, "output_tokens": 0, "blocks": [10]},
    {"arrival_s": 0.015, "input_tokens": 64, "output_tokens": 0, "blocks": [11]},
    {"arrival_s": 0.02, "input_tokens": 128, "output_tokens": 0, "blocks": [12, 13]},
]


def test_the_peak_running_is_the_busiest_rank(tmp_path: Path) -> None:
    spec = spec_for(write_trace(tmp_path / "t.jsonl", TWO_RANKS))
    # 8 pages a rank hold it: rank 0 peaks at 2 running (r0 + r2), rank 1 at 1; the candidate reports rank 0's 2
    t = check_trace(plan(pages=8, dp=2), spec)  # type: ignore[arg-type]
    assert t.holds and t.rank_requests == (3, 2)
    assert t.peak_running == 2
    assert t.peak_held_pages == 6  # rank 0 at 20 ms: r0's 4 + r4's 2 (rank 1 never holds more than 1)
    assert (t.waited, t.preemptions, t.dropped) == (0, 0, 0)  # held: every request admitted on arrival
    # 5 pages a rank: at 20 ms r0 holds 4, r2's page is cached (evictable), 1 page free and r4 needs 2: r4 waits
    # and the replay stops there; the peak so far is still rank 0's 2 running (at 10 ms), not rank 1's 1
    t = check_trace(plan(pages=5, dp=2), spec)  # type: ignore[arg-type]
    s = t.stop
    assert s is not None and (s.index, s.line, s.rank, s.what) == (4, 6, 0, "waited")
    assert t.peak_running == 2
    assert t.peak_held_pages == 5  # rank 0 at 10 ms: r0's 4 + r2's 1; rank 1's peak is 1
    # a stopped replay measures no hit rate: it counts no prompt tokens (the JSON's prompt_tokens 0)
    assert (t.hit_tokens, t.prompt_tokens, t.hit_ppm) == (0, 0, 0)


def test_the_running_limit_binds_at_exactly_max_running(tmp_path: Path) -> None:
    # max_running_requests 1 (SGLang's scheduler admits no request while running == max_running_requests): r1 at
    # 10 ms finds r0 running, 1 of 1, with 4 of 8 pages free: the running limit binds, not the pages
    one = SimpleNamespace(engine="sglang", usable_pages=8, logical_page_tokens=64, max_running_requests=1,
                          deployment=SimpleNamespace(dp_attention=1, mtp=False))  # fmt: skip
    t = check_trace(one, spec_for(write_trace(tmp_path / "t.jsonl", SMALL)))  # type: ignore[arg-type]
    assert t.lacks == (
        "trace: not held: request 1 (line 3) was not admitted on arrival at 0.0 s on rank 0 (4 of 8 pages held, "
        "1 of 1 running: running requests bind)",
    )


def test_an_empty_pool_has_no_headroom(tmp_path: Path) -> None:
    # a 0-page pool: request 0 is too long for it; 0 pages left of 0 is 0 ppm (not a division by zero)
    t = check_trace(plan(pages=0), spec_for(write_trace(tmp_path / "t.jsonl", SMALL)))  # type: ignore[arg-type]
    assert t.stop is not None and t.stop.what == "too long"
    assert t.headroom_ppm == 0


def test_a_decode_time_that_is_not_whole_milliseconds(tmp_path: Path) -> None:
    # --tpot-ms 12.345 reaches the spec as 12,345 µs and prints back as 12.345 ms, not 12
    tr = open_trace(write_trace(tmp_path / "t.jsonl", SMALL))
    spec = trace_spec(tr, min_hit_ppm=0, tpot_us=12_345)
    assert "decode 12.345 ms a token" in spec.service_text()


def test_a_bound_share_just_under_a_rounding_edge() -> None:
    # 364,499 hit tokens of 1,000,000: 364,499 ppm = 36.4499 % prints "36.4%" (36.45 % would print "36.5%")
    t = _fit(bound_tokens=364_499, prompt_tokens=1_000_000)
    assert t.lacks[0].startswith("trace: hit rate at most 36.4% < 50.0%")


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        # the least share on the bound line: 364,501 ppm = 36.4501 % -> "36.5%", 364,499 ppm -> "36.4%"
        ({"bound_tokens": 100_000, "prompt_tokens": 1_000_000, "min_hit_ppm": 364_501},
         "trace: hit rate at most 10.0% < 36.5% on 1 rank (the trace's own reuse, even with unbounded pools)"),
        ({"bound_tokens": 100_000, "prompt_tokens": 1_000_000, "min_hit_ppm": 364_499},
         "trace: hit rate at most 10.0% < 36.4% on 1 rank (the trace's own reuse, even with unbounded pools)"),
        # two DP ranks bound on their own caches: "ranks"
        ({"ranks": 2, "bound_tokens": 100_000, "prompt_tokens": 1_000_000},
         "trace: hit rate at most 10.0% < 50.0% on 2 ranks (the trace's own reuse, even with unbounded pools)"),
        # held: the measured share and the least share, each either side of a rounding edge
        ({"hit_tokens": 364_501, "prompt_tokens": 1_000_000}, "trace: hit rate 36.5% < 50.0%"),
        ({"hit_tokens": 364_499, "prompt_tokens": 1_000_000}, "trace: hit rate 36.4% < 50.0%"),
        ({"hit_tokens": 100_000, "prompt_tokens": 1_000_000, "min_hit_ppm": 364_501}, "trace: hit rate 10.0% < 36.5%"),
        ({"hit_tokens": 100_000, "prompt_tokens": 1_000_000, "min_hit_ppm": 364_499}, "trace: hit rate 10.0% < 36.4%"),
    ],
)  # fmt: skip
def test_the_shares_either_side_of_a_rounding_edge(fields: dict[str, int], line: str) -> None:
    assert _fit(**fields).lacks == (line,)


def test_the_hit_rate_is_floored_to_the_ppm() -> None:
    # 2 of 3 prompt tokens hit: 666,666.67 ppm floors to 666,666; 1 of 4: exactly 250,000
    assert _fit(hit_tokens=2, prompt_tokens=3).hit_ppm == 666_666
    assert _fit(hit_tokens=1, prompt_tokens=4).hit_ppm == 250_000


def test_the_least_hit_rate_is_compared_exactly() -> None:
    # 1 hit token of 101 = 9,900.99 ppm against --min-hit 9,901 ppm: 1 × 10^6 < 9,901 × 101 = 1,000,001, short by
    # one part in 10^6 of a token: not met
    assert not _fit(hit_tokens=1, prompt_tokens=101, min_hit_ppm=9_901).hit_ok
    assert _fit(hit_tokens=1, prompt_tokens=101, min_hit_ppm=9_900).hit_ok  # 1,000,000 >= 999,900


@pytest.mark.parametrize(("time_us", "shown"), [(1_350_000, "1.4"), (1_249_999, "1.2"), (12_345_678_901, "12,345.7")])
def test_the_stop_time_in_seconds(time_us: int, shown: str) -> None:
    # the stop's time in µs printed in seconds to a tenth: 1.35 s -> "1.4", 1.249999 s -> "1.2"
    stop = Stop(index=3, line=5, time_us=time_us, rank=1, what="waited", held_pages=90, running=2)
    assert _fit(ranks=2, stop=stop).stop_text == (
        f"request 3 (line 5) was not admitted on arrival at {shown} s on rank 1 (90 of 100 pages held, 2 of 8 running: "
        "pool pages bind)"
    )


def test_the_bound_is_compared_exactly(tmp_path: Path) -> None:
    # r0 100 tokens (blocks 1 2), r1 1 token (block 1, seen): the reuse bound is min(1 × 64, 1) = 1 token of a
    # 101-token prompt. --min-hit 9,901 ppm asks 9,901 × 101 = 1,000,001 > 1 × 10^6: bounded, not replayed;
    # --min-hit 9,900 ppm asks 999,900 <= 10^6: replayed
    rows = [
        {"arrival_s": 0.0, "input_tokens": 100, "output_tokens": 0, "blocks": [1, 2]},
        {"arrival_s": 1.0, "input_tokens": 1, "output_tokens": 0, "blocks": [1]},
    ]
    path = write_trace(tmp_path / "t.jsonl", rows)
    t = check_trace(plan(pages=8), spec_for(path, min_hit=0.009901))  # type: ignore[arg-type]
    assert (t.bound_tokens, t.prompt_tokens) == (1, 101)
    t = check_trace(plan(pages=8), spec_for(path, min_hit=0.0099))  # type: ignore[arg-type]
    assert t.bound_tokens is None and t.holds
    # a trace whose longest request is 1 token (r1 alone) is a trace: every candidate must admit 1 token
    assert spec_for(write_trace(tmp_path / "one.jsonl", rows[1:])).longest_tokens == 1


def test_the_bound_share_is_floored_before_it_is_printed() -> None:
    # 3,644,997 of 10,000,000 prompt tokens: 364,499.7 ppm floors to 364,499 = "36.4%" (364,500 would print 36.5)
    t = _fit(bound_tokens=3_644_997, prompt_tokens=10_000_000)
    assert t.lacks[0].startswith("trace: hit rate at most 36.4% < 50.0%")

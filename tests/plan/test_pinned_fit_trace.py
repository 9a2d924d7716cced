"""plan/fit_trace.py pinned (issue 26): the trace's longest request counts its output, the figures the lacks and
stop lines print (non-round shares, request 0), a candidate not replayed reports nothing replayed, the headroom."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.plan.fit_trace import TraceFit, check_trace
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

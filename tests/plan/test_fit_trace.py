"""`kvplan fit --trace` (issue 16 item 3): a candidate's own pools, per DP rank, must hold a real trace.

The small trace below (kvplan JSONL, 64-token blocks, prefix-chained ids) is replayed with 64-token pages and the
default service model: prefill 10,000 tokens/s per request (100 µs a token, uncached tokens only), 40 ms a decode
token. Its requests:

    r0  t = 0       256 input, 0 output, blocks 1 2 3 4   (line 2)
    r1  t = 10 ms   256 input, 0 output, blocks 1 2 5 6   (line 3)
    r2  t = 1 s     128 input, 0 output, blocks 1 2       (line 4)

One pool (one rank): r0 is admitted at 0 with 4 pages, commits them, and prefills 256 × 100 µs = 25.6 ms, so it
runs until 25,600 µs (0 output: it finishes when its prefill does). r1 arrives at 10,000 µs while r0 runs: it
hits r0's pages of blocks 1 2 (2 pages, 128 tokens) and needs 2 new pages, so 4 + 2 = 6 pages are held at once:
the trace's peak. It prefills 128 uncached tokens (12.8 ms) and finishes at 22,800 µs. r2 at 1 s hits blocks 1 2
(2 pages, 128 tokens: SGLang's radix tree matches whole pages, 128 // 64 = 2). Hit rate: (0 + 128 + 128) / (256 +
256 + 128) = 256 / 640 = 40.0 %.

- pool 6 pages: holds the trace (peak 6 of 6); pool 5 pages: at 10,000 µs r0 holds 4, 1 page is free and r1
  needs 2: r1 is not admitted on arrival: not held.
- Two DP ranks, round-robin (SGLang): r0 and r2 on rank 0, r1 on rank 1. Each rank holds at most 4 pages (r0
  alone; r1 alone, no hit on rank 1), so 4 pages a rank hold it, where ONE pool of 4 pages does not (r1 would wait
  for 2 pages with 0 free). Hits: r1 finds nothing on rank 1, r2 hits 128 on rank 0: 128 / 640 = 20.0 %.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.plan.fit_trace import TraceSpec, check_trace, reuse_bound, trace_spec, with_trace
from kvplan.sim.blockpool import BlockPool
from kvplan.sim.paging import Paging
from kvplan.sim.radix import RadixPool
from kvplan.sim.ranks import replay_ranks
from kvplan.sim.replay import Service
from kvplan.sim.trace import CompactTrace, open_trace

HEADER = {"kvplan_trace": 1, "block_size": 64, "chained": True}
SMALL = [
    {"arrival_s": 0.0, "input_tokens": 256, "output_tokens": 0, "blocks": [1, 2, 3, 4]},
    {"arrival_s": 0.01, "input_tokens": 256, "output_tokens": 0, "blocks": [1, 2, 5, 6]},
    {"arrival_s": 1.0, "input_tokens": 128, "output_tokens": 0, "blocks": [1, 2]},
]


def write_trace(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in [HEADER, *rows]) + "\n")
    return path


def spec_for(path: Path, min_hit: float = 0.0) -> TraceSpec:
    return trace_spec(open_trace(path), min_hit_ppm=round(min_hit * 1_000_000))


def plan(engine: str = "sglang", pages: int = 6, dp: int = 1, mtp: bool = False, page: int = 64) -> object:
    """The few PoolPlan fields the trace check reads (kvplan.plan.fit_trace.trace_key)."""
    return SimpleNamespace(
        engine=engine,
        usable_pages=pages,
        logical_page_tokens=page,
        max_running_requests=8,
        deployment=SimpleNamespace(dp_attention=dp, mtp=mtp),
    )


def test_spec_reads_the_trace_once_and_requires_its_longest_request(tmp_path: Path) -> None:
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL))
    assert (spec.requests, spec.longest_tokens, spec.prompt_tokens) == (3, 256, 640)  # 256 + 256 + 128
    req = with_trace(Requirements(min_ctx_tokens=100), spec)
    assert req.min_ctx_tokens == 256  # the larger of the flag's 100 and the trace's longest 256
    assert with_trace(Requirements(min_ctx_tokens=1 << 20), spec).min_ctx_tokens == 1 << 20


def test_one_pool_of_6_pages_holds_the_trace_with_a_40_percent_hit(tmp_path: Path) -> None:
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL), min_hit=0.4)
    t = check_trace(plan(pages=6), spec)  # type: ignore[arg-type]
    assert t.holds and t.stop is None
    assert t.peak_held_pages == 6  # r0's 4 pages + r1's 2 new ones at 10 ms
    assert (t.hit_tokens, t.prompt_tokens, t.hit_ppm) == (256, 640, 400_000)
    assert t.ok  # 40.0 % >= --min-hit 0.4 (256 × 10^6 = 400,000 × 640)
    assert t.rank_requests == (3,)


def test_a_pool_of_5_pages_is_rejected_for_the_trace_peak(tmp_path: Path) -> None:
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL))
    t = check_trace(plan(pages=5), spec)  # type: ignore[arg-type]
    assert not t.holds and not t.ok
    s = t.stop
    assert s is not None and (s.index, s.line, s.time_us, s.rank, s.what) == (1, 3, 10_000, 0, "waited")
    assert (s.held_pages, s.running) == (4, 1)  # r0's 4 pages; 1 free, r1 needs 2
    assert t.lacks == (
        "trace: not held: request 1 (line 3) was not admitted on arrival at 0.0 s on rank 0 (4 of 5 pages held, "
        "1 of 8 running: pool pages bind)",
    )


def test_a_candidate_is_rejected_for_the_hit_rate(tmp_path: Path) -> None:
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL), min_hit=0.5)
    t = check_trace(plan(pages=6), spec)  # type: ignore[arg-type]
    # the reuse bound on one rank is the replay's own 256 tokens (every leading block seen before is hit here),
    # 256 × 10^6 < 500,000 × 640: no replay needed, rejected for the hit rate
    assert t.bound_tokens == 256 and not t.ok
    assert t.lacks == (
        "trace: hit rate at most 40.0% < 50.0% on 1 rank (the trace's own reuse, even with unbounded pools)",
    )


def test_dp_ranks_replay_their_own_pools(tmp_path: Path) -> None:
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL), min_hit=0.2)
    # ONE pool of 4 pages: r1 waits (r0 holds all 4)
    assert not check_trace(plan(pages=4), spec).holds  # type: ignore[arg-type]
    # two DP ranks of 4 pages each, round-robin: r0, r2 on rank 0 and r1 on rank 1, at most 4 pages a rank
    t = check_trace(plan(pages=4, dp=2), spec)  # type: ignore[arg-type]
    assert t.holds and t.ranks == 2 and t.router == "round_robin"
    assert t.rank_requests == (2, 1) and t.peak_held_pages == 4
    assert (t.hit_tokens, t.hit_ppm) == (128, 200_000)  # only r2 hits, on rank 0: 128 / 640
    assert t.ok  # 20.0 % >= 0.2
    # --min-hit 0.4 on two ranks: the round-robin reuse bound is 128 tokens (r1 on rank 1 has seen nothing)
    assert reuse_bound(spec, 2, "round_robin") == 128
    assert reuse_bound(spec, 2, "least_unfinished") == 256  # not a fixed split: bounded by one shared cache


def test_replays_are_cached_per_pool(tmp_path: Path) -> None:
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL))
    a = check_trace(plan(pages=6), spec)  # type: ignore[arg-type]
    b = check_trace(plan(pages=6), spec)  # type: ignore[arg-type]
    assert a is b and len(spec.cache) == 1
    check_trace(plan(pages=6, mtp=True), spec)  # type: ignore[arg-type]
    check_trace(plan(engine="vllm", pages=6), spec)  # type: ignore[arg-type]
    assert len(spec.cache) == 3


def test_vllm_routes_to_the_rank_with_fewest_unfinished_requests(tmp_path: Path) -> None:
    """r0 runs long (100 output tokens: 25.6 ms + 100 × 40 ms = 4.0256 s); r1 is short; r2 at 1 s, r3 (one new
    block) at 1.01 s; two block pools of 20 blocks.

    Round-robin: ranks 0 1 0 1, two requests each. vLLM: r0 -> rank 0 (a tie at 0, lowest rank); r1 at 10 ms ->
    rank 1 (rank 0 has 1 unfinished); r1 prefills 256 tokens and finishes at 35.6 ms. r2 at 1 s -> rank 1 (rank 0
    still runs r0); there it hits r1's block 1 only (vLLM stops a hit at length − 1: (128 − 1) // 64 = 1 block),
    prefills 64 tokens (6.4 ms) and finishes at 1.0064 s. r3 at 1.01 s -> rank 1 (empty again): 1 request on rank
    0, 3 on rank 1.
    """
    rows = [dict(SMALL[0], output_tokens=100), SMALL[1], SMALL[2],
            {"arrival_s": 1.01, "input_tokens": 64, "output_tokens": 0, "blocks": [9]}]  # fmt: skip
    tr = CompactTrace(open_trace(write_trace(tmp_path / "t.jsonl", rows)))

    def ranks(router: str) -> tuple[tuple[int, ...], int]:
        results, stop = replay_ranks(
            tr.read(),
            [BlockPool(20, 64), BlockPool(20, 64)],
            lambda: Paging(64, 64),
            service=Service(10_000, 40_000, 8),
            router=router,
        )
        assert stop is None
        return tuple(r.requests for r in results), sum(r.result.stats.hit_tokens for r in results)

    assert ranks("round_robin") == ((2, 2), 64)  # r2 on rank 0 hits r0's block 1 (length − 1 again)
    assert ranks("least_unfinished") == ((1, 3), 64)  # r2 on rank 1 hits r1's block 1


def test_the_sglang_radix_pool_under_dp_ranks(tmp_path: Path) -> None:
    """The same replay with SGLang's radix tree (whole-page matches: r2 hits both its pages) and round-robin."""
    tr = CompactTrace(open_trace(write_trace(tmp_path / "t.jsonl", SMALL)))
    results, stop = replay_ranks(
        tr.read(), [RadixPool(4, 64), RadixPool(4, 64)], lambda: Paging(64, 64),
        service=Service(10_000, 40_000, 8), router="round_robin",
    )  # fmt: skip
    assert stop is None
    assert [r.peak_held_pages for r in results] == [4, 4]
    assert [r.result.stats.hit_tokens for r in results] == [128, 0]


def test_pages_that_do_not_nest_with_the_trace_blocks_are_reported(tmp_path: Path) -> None:
    # 128-token trace blocks and 192-token pages (64 × dcp 3): neither divides the other
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"kvplan_trace": 1, "block_size": 128}) + "\n"
                    + json.dumps({"arrival_s": 0, "input_tokens": 128, "blocks": [1]}) + "\n")  # fmt: skip
    t = check_trace(plan(pages=6, page=192), spec_for(path))  # type: ignore[arg-type]
    assert t.error is not None and "do not nest" in t.error and not t.ok


def test_bad_trace_is_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(HEADER) + "\n" + '{"arrival_s": 0, "input_tokens": "many"}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:2"):
        spec_for(bad)
    empty = write_trace(tmp_path / "empty.jsonl", [])
    with pytest.raises(InputError, match="no requests"):
        spec_for(empty)

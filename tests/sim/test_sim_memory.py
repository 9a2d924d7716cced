"""Memory bounded by the pool, not by the trace (issue 15): the one-pass LRU curve, occupancy mode's timeline, and
a trace parsed once per run.

The curve tracks only the ``max(capacities)`` most recent blocks in a Fenwick tree that is renumbered when it
fills; these tests shrink the tree so that renumbering and forgetting happen on small traces, and check the curve
against leaf-LRU replays at every capacity.
"""

from __future__ import annotations

import shutil
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import ideal
from kvplan.sim.paging import Paging
from kvplan.sim.radix import RadixPool
from kvplan.sim.replay import TIMELINE_POINTS, Service, Timeline, replay_occupancy
from kvplan.sim.run import SimConfig, run_one, run_sweep
from kvplan.sim.trace import CompactTrace, Request, Trace, open_trace
from tests.sim.test_sim_properties import ALL, BS, chained_traces


@given(reqs=chained_traces(), caps=st.lists(st.integers(1, 12), min_size=1, max_size=4), last50=st.booleans())
def test_curve_with_renumbering_equals_replays(reqs: list[Request], caps: list[int], last50: bool) -> None:
    # a tree that starts with 2 slots: it renumbers every few requests, doubles when the live times fill more than
    # half of it, and forgets every block deeper than the largest capacity; the hits must still be leaf-LRU's
    win = ideal.Window("last50", len(reqs) // 2) if last50 else ALL
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ideal, "_TREE_BITS", 1)
        curve = ideal.lru_curve(reqs, block_tokens=BS, capacities=caps, window=win)
    bound = ideal.reuse_bound(reqs, block_tokens=BS, window=win)
    assert curve.unbounded_hit_tokens == bound.hit_tokens
    for p in curve.points:
        r = ideal.replay(reqs, block_tokens=BS, capacity=p.capacity_units, policy="lru", window=win, check=True)
        assert (p.hit_tokens, p.hit_units) == (r.stats.hit_tokens, r.stats.hit_units)


def _fresh(n: int) -> Iterator[Request]:
    """n requests of 4 new 4-token blocks each, then the first request again: 4n distinct blocks."""
    for i in range(n):
        yield Request(i, 0, 16, 0, [4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3], i + 1)
    yield Request(n, 0, 16, 0, [0, 1, 2, 3], n + 1)


def test_curve_memory_does_not_grow_with_the_trace() -> None:
    # 2,000 requests, 8,000 distinct blocks, capacities up to 100 blocks. The old curve kept a dict entry per
    # distinct block (about 100 B each with its ints: 800 KB) and a Python list of 8 B per reference; now: a tree
    # of 2**8 = 256 slots here (2 arrays of 8-byte cells: 4 KB; 2**16 slots to start with by default, 1 MiB), the
    # 100 most recent blocks (about 10 KB) and one byte per block id seen (8 KB)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ideal, "_TREE_BITS", 8)
        tracemalloc.start()
        curve = ideal.lru_curve(_fresh(2_000), block_tokens=4, capacities=[10, 100], window=ALL)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    # the last request's blocks were seen (the unbounded pool hits all 16 tokens) but are 8,000 deep: no hit
    assert curve.unbounded_hit_tokens == 16
    assert [p.hit_tokens for p in curve.points] == [0, 0]
    assert peak < 100_000, f"{peak:,} B"


def test_timeline_keeps_at_most_its_points_and_the_peaks() -> None:
    # 100,000 samples 7 us apart, held pages i % 1000, one peak of 5,000 at sample 61,234: at most 400 samples
    # come back, in time order, the peak among them, and every sample kept is the largest of its time bucket
    tl = Timeline(400)
    samples = [(7 * i, 1, 0, 5_000 if i == 61_234 else i % 1_000, 0) for i in range(100_000)]
    for s in samples:
        tl.add(s)
    out = tl.points()
    assert 200 <= len(out) <= 400
    assert [s[0] for s in out] == sorted(s[0] for s in out)
    assert samples[61_234] in out
    # 700,000 us in at most 400 buckets of a power-of-two width: 2**11 = 2,048 us (342 buckets)
    assert tl.width == 2_048 and len(out) == -(-699_994 // 2_048)
    peak: dict[int, int] = {}
    for x in samples:
        peak[x[0] // 2_048] = max(peak.get(x[0] // 2_048, 0), x[3])
    assert [s[3] for s in out] == [peak[s[0] // 2_048] for s in out]


def _arrivals(n: int) -> Iterator[Request]:
    """n requests of one fresh 64-token block and one output token, 1 ms apart."""
    for i in range(n):
        yield Request(i, 1_000 * i, 64, 1, [i], i + 1)


def test_occupancy_memory_does_not_grow_with_the_trace() -> None:
    # the old replay kept every sample (a 5-tuple after each event, a few events a request) to downsample at the
    # end: 3.1 MB traced at 6,000 requests, 6.0 MB at 12,000. Now the timeline is 400 samples at most and what
    # grows is one 8-byte hit length and one 8-byte wait per measured request (96 KB here); the rest is the pool
    # (1,000 pages) and the interpreter's own: about 0.7 MB whatever the length
    pool = RadixPool(1_000, 64)
    tracemalloc.start()
    r = replay_occupancy(_arrivals(6_000), pool, Paging(64, 64), service=Service(), window=ALL)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert r.occupancy is not None and r.occupancy.completed == 6_000
    assert len(r.occupancy.timeline) <= TIMELINE_POINTS
    assert peak < 1_500_000, f"{peak:,} B"


@pytest.mark.parametrize(
    "rel",
    ["mooncake/synthetic_trace.jsonl", "kv-cache-tester-claude-code", "azure-llm-2023/AzureLLMInferenceTrace_code.csv"],
)
def test_compact_trace_replays_the_same_requests(traces: Path, tmp_path: Path, rel: str) -> None:
    # the parsed-once form gives back every field of every request (blocks None where the format has none)
    path = traces / rel
    if path.is_dir():
        # two conversations (two id namespaces, file numbers 0 and 1): the two smallest files
        for f in sorted(path.glob("*.json"), key=lambda f: f.stat().st_size)[:2]:
            shutil.copy(f, tmp_path / f.name)
        path = tmp_path
    tr = open_trace(path)
    compact = CompactTrace(tr)
    fields = ("index", "arrival_us", "input_tokens", "output_tokens", "blocks", "line", "file")
    a = [tuple(getattr(r, f) for f in fields) for r in tr.read()]
    b = [tuple(getattr(r, f) for f in fields) for r in compact.read()]
    assert a == b and len(compact) == len(a) > 0


def test_engine_sweep_parses_the_trace_once(mooncake_file: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # the defect: a per-capacity sweep parsed the file once per capacity (in each worker process). Three
    # capacities, one read; each point equals a replay of its own at that capacity
    path = mooncake_file([(0, 1024, 4, [0, 1]), (10, 1536, 4, [0, 1, 2]), (20, 1024, 4, [0, 3])])
    tr = open_trace(path)
    cfg = SimConfig(tr, "sglang", "lru", ALL, 64, None)
    reads = []
    real = Trace.read

    def counted(self: Trace, stats: Any = None) -> Any:
        reads.append(1)
        return real(self, stats)

    monkeypatch.setattr(Trace, "read", counted)
    sweep = run_sweep(cfg, [8, 16, 40], jobs=1)
    assert len(reads) == 1
    monkeypatch.setattr(Trace, "read", real)
    for p in sweep.points:
        one = run_one(replace(cfg, capacity_units=p.capacity_units))
        assert (p.hit_tokens, p.evictions) == (one.stats.hit_tokens, one.evictions)

"""The insertion-clock FIFO curve (``kvplan/sim/fifo_clock.py``) against the set-and-deque curve
(``ideal.fifo_curve``, the reference) and the one-capacity OrderedDict replay: the same hit tokens, hit blocks and
fill verdicts at every capacity, on every shared trace with block ids and on adversarial sequences."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import fifo_clock, ideal
from kvplan.sim.ideal import Window
from kvplan.sim.run import make_window
from kvplan.sim.trace import Request, open_trace
from tests.sim.test_sim_fifo_curve import loose_traces
from tests.sim.test_sim_properties import ALL, BS, chained_traces

CURVE = [round(400 * (100_000 / 400) ** (i / 9)) for i in range(10)]
"""benchmarks/sim_vs_kvcache_simulator.py's 10-point curve, and small pools below the longest request."""
SMALL = [1, 2, 3, 10, 64, 200]


def _points(curve: ideal.Sweep) -> list[tuple[int, int, int, bool, bool]]:
    return [(p.capacity_units, p.hit_tokens, p.hit_units, p.filled, p.filled_before_window) for p in curve.points]


def _same(reqs: list[Request], caps: list[int], window: Window, block_tokens: int = BS) -> list[tuple[int, ...]]:
    ours = fifo_clock.fifo_curve(reqs, block_tokens=block_tokens, capacities=caps, window=window)
    ref = ideal.fifo_curve(reqs, block_tokens=block_tokens, capacities=caps, window=window)
    assert _points(ours) == _points(ref)
    assert (ours.measured_tokens, ours.requests) == (ref.measured_tokens, ref.requests)
    return [p[:3] for p in _points(ours)]


@pytest.mark.parametrize(
    "name", ["mooncake/conversation_trace.jsonl", "mooncake/synthetic_trace.jsonl", "kv-cache-tester-claude-code"]
)
def test_every_shared_trace(traces: Path, name: str) -> None:
    # every trace in ../shared/traces that lists block ids (Azure lists none; RAGPulse's are not prefix-chained
    # and the reader refuses them)
    tr = open_trace(traces / name)
    reqs = list(tr.read())
    _same(reqs, CURVE + SMALL, make_window(tr, "last50"), tr.block_tokens)


def _singles(seq: list[int]) -> list[Request]:
    return [Request(i, i, BS, 0, [b], i + 1) for i, b in enumerate(seq)]


def test_belady_anomaly() -> None:
    # Belady, Nelson, Shedler (CACM 1969): FIFO on 1 2 3 4 1 2 5 1 2 3 4 5 faults 9 times with 3 frames and 10
    # with 4, so 12 - 9 = 3 and 12 - 10 = 2 hits; one block (4 tokens) a request, every request measured
    reqs = _singles([1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5])
    assert _same(reqs, [3, 4], ALL) == [(3, 3 * BS, 3), (4, 2 * BS, 2)]


def test_one_block_pool_and_requests_longer_than_the_pool() -> None:
    # block FIFO, one block of 4 tokens each; a request hits the blocks it finds before it runs.
    # C = 1: r0 [1, 2, 3] leaves {3}; r1 [3, 3] finds 3 twice (2 blocks; no insertion); r2 [1, 2, 3] misses 1.
    # C = 2: r0 leaves {2, 3}; r1 hits 2 blocks; r2 misses 1, which evicts 2 -> {3, 1}; 2 then evicts 3, which
    #   was cached when r2 started but is gone at its turn (the request's own misses expired it) -> {1, 2}; 3
    #   goes in again. Hits at both: 2 blocks, 8 tokens.
    reqs = [Request(0, 0, 12, 0, [1, 2, 3], 1), Request(1, 1, 8, 0, [3, 3], 2), Request(2, 2, 12, 0, [1, 2, 3], 3)]
    assert _same(reqs, [1, 2], ALL) == [(1, 2 * BS, 2), (2, 2 * BS, 2)]


@given(
    st.one_of(chained_traces(), loose_traces()),
    st.lists(st.integers(0, 25), min_size=1, max_size=6),
    st.integers(0, 20),
    st.sampled_from([0, 3, 1 << 25]),
)
def test_random_sequences(reqs: list[Request], caps: list[int], start: int, dense: int) -> None:
    # ids from a small range: repeats inside a request, blocks at the cache's old end, requests longer than C;
    # the byte map of listed ids cut short so some ids go to the IdSet
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ideal, "_DENSE_IDS", dense)
        _same(reqs, caps, Window("last50", min(start, len(reqs))))

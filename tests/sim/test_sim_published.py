"""Published checks on the Mooncake FAST'25 traces, and the one-pass curve against per-capacity replays.

The expected values come from ``shared/traces/reference-results/mooncake_fast25_fig9_digitized.csv`` (Figure 9,
digitized to about ±0.005) and the paper's Table 2 cache ratios (mooncake/README.md), read here, not copied.
Semantics: ``ideal`` leaf-LRU, every request measured, capacity tokens // 512 blocks.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvplan.sim import ideal
from kvplan.sim.ideal import Window
from kvplan.sim.published import FIG9_CAPACITIES, FIG9_PPM, TABLE2_CACHE_RATIO_PPM, fig9_points
from kvplan.sim.trace import open_trace

ALL = Window("all", 0)


def _fig9(traces: Path) -> dict[str, dict[int, float]]:
    with (traces / "reference-results" / "mooncake_fast25_fig9_digitized.csv").open() as f:
        rows = list(csv.DictReader(f))
    out: dict[str, dict[int, float]] = {}
    for row in rows:
        for kind in ("conversation", "tool_agent", "synthetic"):
            if row[kind]:
                out.setdefault(kind, {})[int(row["capacity_tokens"])] = float(row[kind])
    return out


def _curve(traces: Path, kind: str, capacities: list[int]) -> dict[int, float]:
    tr = open_trace(traces / "mooncake" / f"{kind}_trace.jsonl")
    blocks = [c // 512 for c in capacities]
    w = ideal.lru_curve(tr.read(), block_tokens=512, capacities=blocks, window=ALL)
    assert w.unbounded_hit_tokens is not None
    rates = {p.capacity_units: p.hit_tokens / w.measured_tokens for p in w.points}
    out = {c: rates[c // 512] for c in capacities}
    out[0] = w.unbounded_hit_tokens / w.measured_tokens
    return out


def test_embedded_figure9_matches_the_digitized_file(traces: Path) -> None:
    fig9 = _fig9(traces)
    for kind in FIG9_PPM:
        expected = {c: round(v * 1_000_000) for c, v in fig9[kind].items()}
        assert dict(fig9_points(kind)) == expected, kind
    assert set(FIG9_CAPACITIES) == set(fig9["conversation"])


def test_table2_cache_ratio(traces: Path) -> None:
    """Unbounded pool, every request measured, against Table 2's whole-percent cache ratios.

    Synthetic: 39,852,661 of 61,194,628 tokens = 65.1% against 66%. Conversation: 54,098,411 of 144,793,823 =
    37.4% against 40%, the known
    shortfall of this trace (Figure 9's plateau is 0.401 too): 2.6 points under.
    """
    syn = _curve(traces, "synthetic", [])[0]
    conv = _curve(traces, "conversation", [])[0]
    assert abs(syn - TABLE2_CACHE_RATIO_PPM["synthetic"] / 1e6) <= 0.015, syn
    shortfall = TABLE2_CACHE_RATIO_PPM["conversation"] / 1e6 - conv
    assert 0.02 <= shortfall <= 0.03, shortfall


def test_figure9_synthetic_within_0015(traces: Path) -> None:
    """Every digitized capacity of the synthetic curve within 0.015 (the largest gap, 0.0130, is at 1e7)."""
    paper = _fig9(traces)["synthetic"]
    ours = _curve(traces, "synthetic", sorted(paper))
    gaps = {c: abs(ours[c] - v) for c, v in paper.items()}
    assert max(gaps.values()) <= 0.015, gaps


def test_figure9_conversation_lands_a_few_points_under(traces: Path) -> None:
    """The conversation trace lands under the paper at every capacity, by 0.35 (1e4) to 3.69 points (5e6)."""
    paper = _fig9(traces)["conversation"]
    ours = _curve(traces, "conversation", sorted(paper))
    gaps = {c: v - ours[c] for c, v in paper.items()}
    assert all(0 < g <= 0.04 for g in gaps.values()), gaps


@pytest.mark.parametrize("kind", ["conversation", "synthetic"])
@pytest.mark.parametrize("last50", [False, True])
def test_one_pass_curve_equals_replays(traces: Path, kind: str, last50: bool) -> None:
    """Stack distances give, at every capacity, the hit tokens of a leaf-LRU replay at that capacity."""
    tr = open_trace(traces / "mooncake" / f"{kind}_trace.jsonl")
    win = Window("last50", tr.count() // 2) if last50 else ALL
    caps = [1, 7, 100, 2_000, 20_000]
    curve = ideal.lru_curve(tr.read(), block_tokens=512, capacities=caps, window=win)
    for p in curve.points:
        r = ideal.replay(tr.read(), block_tokens=512, capacity=p.capacity_units, policy="lru", window=win)
        assert (p.hit_tokens, p.hit_units) == (r.stats.hit_tokens, r.stats.hit_units), p.capacity_units
        assert curve.measured_tokens == r.stats.measured_tokens
        assert (p.filled_before_window, p.filled) == (r.filled_before_window, r.filled_at is not None)

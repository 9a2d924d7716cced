"""Published Mooncake hit rates, for checks and for plots (overlaid when the trace is a Mooncake one).

Source: Qin et al., "Mooncake: Trading More Storage for Less Computation", USENIX FAST'25
(``kvcache-ai/Mooncake`` ``FAST25-release/Mooncake-FAST25.pdf``). Figure 9 (page 11) was digitized from the
600-dpi rendered vector plot, accurate to about ±0.005; x positions 2e6 and 5e6 were inferred from polyline kinks
and empty cells had no visible kink (``shared/traces/reference-results/mooncake_fast25_fig9_digitized.csv``,
which a test compares with these numbers). Values are hit rates in parts per million, capacities in tokens.
The paper states no eviction policy; its caption says only the sequence of requests is considered.
"""

from __future__ import annotations

from pathlib import Path

FIG9_CAPACITIES = (10_000, 100_000, 1_000_000, 2_000_000, 3_000_000, 5_000_000, 10_000_000, 50_000_000,
                   100_000_000, 1_000_000_000)  # fmt: skip

FIG9_PPM: dict[str, tuple[int | None, ...]] = {
    "conversation": (46_000, 74_000, 88_000, 122_000, 175_000, 248_000, 327_000, 398_000, 401_000, 401_000),
    "tool_agent": (175_000, 363_000, 385_000, 415_000, 454_000, 507_000, 561_000, 594_000, 594_000, 594_000),
    "synthetic": (0, 13_000, 148_000, 235_000, 316_000, None, 590_000, 657_000, 657_000, 657_000),
}

TABLE2_CACHE_RATIO_PPM = {"conversation": 400_000, "tool_agent": 590_000, "synthetic": 660_000}
"""Paper Table 2, "Cache Ratio" (whole percents)."""

_FILES = {
    "conversation_trace.jsonl": "conversation",
    "toolagent_trace.jsonl": "tool_agent",
    "synthetic_trace.jsonl": "synthetic",
}


def mooncake_trace_kind(path: Path) -> str | None:
    """'conversation', 'tool_agent' or 'synthetic' for the FAST'25 trace files (by name), else None."""
    return _FILES.get(path.name.removesuffix(".gz"))


def fig9_points(kind: str) -> list[tuple[int, int]]:
    """(capacity tokens, hit rate ppm) of a Figure 9 curve, the empty cells left out."""
    return [(c, v) for c, v in zip(FIG9_CAPACITIES, FIG9_PPM[kind], strict=True) if v is not None]

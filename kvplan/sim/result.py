"""What a replay measures: integer tallies only (rates and units are formatted in ``kvplan.render``)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

HIT_BUCKETS = (0, 1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18)
"""Upper bounds (tokens, inclusive) of the hit-length histogram buckets; one more bucket holds the rest."""


def percentile(sorted_values: list[int], q: int) -> int:
    """Nearest-rank percentile (q in 0..100) of an ascending list; 0 for an empty one."""
    if not sorted_values:
        return 0
    rank = max(1, -(-q * len(sorted_values) // 100))
    return sorted_values[rank - 1]


@dataclass
class Refused:
    """Requests the engine rejects for their length (``kvplan.sim.context``): never replayed."""

    requests: int = 0
    input_tokens: int = 0
    context_tokens: int | None = None
    """The context length that bounded the replay (None: no deployment named, nothing bounded)."""

    def add(self, input_tokens: int) -> None:
        self.requests += 1
        self.input_tokens += input_tokens


@dataclass
class HitStats:
    """Hits of the requests inside the measurement window."""

    measured: int = 0
    measured_tokens: int = 0
    """Denominator of the token-weighted hit rate."""
    hit_tokens: int = 0
    measured_units: int = 0
    """Blocks (ideal) or pages (engines) of the measured requests: the block-weighted denominator."""
    hit_units: int = 0
    lengths: array[int] = field(default_factory=lambda: array("q"))
    """Hit tokens of each measured request, in order."""

    def add(self, tokens: int, hit_tokens: int, units: int, hit_units: int) -> None:
        self.measured += 1
        self.measured_tokens += tokens
        self.hit_tokens += hit_tokens
        self.measured_units += units
        self.hit_units += hit_units
        self.lengths.append(hit_tokens)

    def length_percentiles(self) -> dict[str, int]:
        s = sorted(self.lengths)
        return {"p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99), "max": s[-1] if s else 0}

    def histogram(self) -> list[tuple[int, int, int]]:
        """(low exclusive, high inclusive, requests) per bucket; the first bucket is exactly 0, the last open (-1)."""
        counts = [0] * (len(HIT_BUCKETS) + 1)
        for n in self.lengths:
            i = 0
            while i < len(HIT_BUCKETS) and n > HIT_BUCKETS[i]:
                i += 1
            counts[i] += 1
        out = [(-1, 0, counts[0])]
        for i in range(1, len(HIT_BUCKETS)):
            out.append((HIT_BUCKETS[i - 1], HIT_BUCKETS[i], counts[i]))
        out.append((HIT_BUCKETS[-1], -1, counts[-1]))
        return out


@dataclass
class Occupancy:
    """Occupancy mode: arrivals, waits, queue and pool use over time (times in microseconds)."""

    completed: int = 0
    preemptions: int = 0
    waits_us: array[int] = field(default_factory=lambda: array("q"))
    """Wait from arrival to first admission, per request (measured window)."""
    max_queue: int = 0
    queue_area: int = 0
    """Integral of the queue length over time (request-microseconds); / makespan = mean queue."""
    used_area: int = 0
    """Integral of pages held by running requests over time (page-microseconds)."""
    makespan_us: int = 0
    peak_running: int = 0
    prefill_tokens: int = 0
    """Tokens prefilled (cache misses, recomputation after preemption included)."""
    timeline: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    """(time us, running, waiting, pages held by running requests, pages cached and unreferenced), downsampled."""

    def wait_percentiles(self) -> dict[str, int]:
        s = sorted(self.waits_us)
        return {"p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99), "max": s[-1] if s else 0}


@dataclass
class SimResult:
    """One replay at one capacity."""

    semantics: str
    policy: str
    mode: str
    """'order' or 'occupancy'."""
    window: str
    window_start: int
    """Index of the first measured request."""
    requests: int
    unit: str
    """'block' (ideal: the trace's own blocks) or 'page' (an engine's pages)."""
    unit_tokens: int
    capacity_units: int | None
    """None: unbounded."""
    stats: HitStats
    evictions: int = 0
    """Units evicted from the cache to make room."""
    peak_used_units: int = 0
    used_sum: int = 0
    used_samples: int = 0
    """Order mode: pages in use (cached + held) after each request, summed; / samples = mean."""
    too_long: int = 0
    """Requests that could not run at all: larger than the whole pool."""
    filled_at: int | None = None
    """Index of the request during which the pool first filled up (None: never)."""
    occupancy: Occupancy | None = None
    input_tokens: int = 0
    """Input tokens of all replayed requests."""
    bad_records: int = 0
    """Malformed records skipped (``--skip-bad``)."""
    refused: Refused = field(default_factory=Refused)

    @property
    def filled_before_window(self) -> bool:
        """The pool was full before the first measured request ran (never under ``--window all``)."""
        return self.filled_at is not None and self.filled_at < self.window_start

    @property
    def mean_used_units(self) -> int:
        return self.used_sum // self.used_samples if self.used_samples else 0


@dataclass(frozen=True)
class SweepPoint:
    capacity_units: int
    hit_tokens: int
    hit_units: int
    filled_before_window: bool
    """The pool was full before the first measured request ran (never under ``--window all``): the same meaning
    as ``SimResult.filled_before_window``."""
    evictions: int | None = None
    peak_used_units: int | None = None
    filled: bool = False
    """The pool filled at some point of the replay (if not, a larger pool cannot hit more)."""


@dataclass
class Sweep:
    """A hit-rate curve: one point per capacity, over the same measured requests."""

    semantics: str
    policy: str
    window: str
    window_start: int
    requests: int
    unit: str
    unit_tokens: int
    measured_tokens: int
    measured_units: int
    points: list[SweepPoint]
    method: str
    """'one pass (LRU stack distances)' or 'one replay per capacity'."""
    unbounded_hit_tokens: int | None = None
    """The reuse bound: hit tokens with an unbounded cache (known for the one-pass curve)."""
    distinct_before_window: int | None = None
    input_tokens: int = 0
    bad_records: int = 0
    refused: Refused = field(default_factory=Refused)


@dataclass(frozen=True)
class Window:
    name: str
    """'all' or 'last50'."""
    start: int
    """Index of the first measured request."""


@dataclass(frozen=True)
class ReplayCounts:
    """What one replay of the ideal semantics counted besides its hits."""

    requests: int
    evictions: int
    peak: int
    used_sum: int
    filled_at: int | None
    input_tokens: int


def ideal_result(
    policy: str, window: Window, block_tokens: int, cap: int | None, stats: HitStats, c: ReplayCounts
) -> SimResult:
    return SimResult(
        semantics="ideal",
        policy=policy,
        mode="order",
        window=window.name,
        window_start=window.start,
        requests=c.requests,
        unit="block",
        unit_tokens=block_tokens,
        capacity_units=cap,
        stats=stats,
        evictions=c.evictions,
        peak_used_units=c.peak,
        used_sum=c.used_sum,
        used_samples=c.requests,
        filled_at=c.filled_at,
        input_tokens=c.input_tokens,
    )


def ideal_sweep(
    policy: str,
    window: Window,
    block_tokens: int,
    measured: tuple[int, int, int, int],
    points: list[SweepPoint],
    method: str,
    **extra: int,
) -> Sweep:
    """A curve of the ideal semantics; ``measured``: requests, measured tokens and blocks, input tokens."""
    n, measured_tokens, measured_blocks, input_tokens = measured
    return Sweep(
        semantics="ideal",
        policy=policy,
        window=window.name,
        window_start=window.start,
        requests=n,
        unit="block",
        unit_tokens=block_tokens,
        measured_tokens=measured_tokens,
        measured_units=measured_blocks,
        points=points,
        method=method,
        input_tokens=input_tokens,
        **extra,  # type: ignore[arg-type]
    )

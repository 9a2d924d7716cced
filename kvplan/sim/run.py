"""What ``kvplan simulate`` runs: capacities from the command line, one replay, or a curve.

A curve under ``ideal`` leaf-LRU comes from one pass over the trace (stack distances), under ``ideal`` FIFO from
one read (one cache per capacity); every other curve replays the trace once per capacity, in parallel processes
that share the trace parsed once (``CompactTrace``, in flat arrays, forked to the workers).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from kvplan import limits
from kvplan.errors import InputError
from kvplan.lengths import ContextLimit
from kvplan.sim import ideal
from kvplan.sim.context import admitted
from kvplan.sim.ideal import Window
from kvplan.sim.result import Refused, SimResult, Sweep, SweepPoint
from kvplan.sim.service import Service
from kvplan.sim.trace import CompactTrace, ReadStats, Request, Trace
from kvplan.units import parse_bytes, parse_tokens

if TYPE_CHECKING:  # an ideal replay or curve loads no engine pool, replay or process pool (about 20 ms)
    from kvplan.sim.paging import Paging
    from kvplan.sim.pool import Pool

SEMANTICS = ("ideal", "sglang", "vllm")
WINDOWS = ("all", "last50")
DEFAULT_SWEEP_POINTS = 10

Progress = Callable[[int], None]


@dataclass(frozen=True)
class SimConfig:
    trace: Trace
    semantics: str
    policy: str
    window: Window
    unit_tokens: int
    """Tokens of the capacity unit: the trace's block (ideal) or the engine's page."""
    capacity_units: int | None
    """Pool size in units; None: unbounded (ideal only)."""
    occupancy: bool = False
    service: Service = field(default_factory=Service)
    eagle: bool = False
    check: bool = False
    context: ContextLimit | None = None
    """The deployment's context length: longer requests are rejected, not replayed (None: no deployment)."""

    def pool(self) -> Pool:
        from kvplan.sim.registry import engine_pool

        cap = self.capacity_units
        assert cap is not None, "engine pools have a size"
        return engine_pool(
            self.semantics, cap, self.unit_tokens, self.paging(), policy=self.policy, eagle=self.eagle,
            check=self.check,
        )  # fmt: skip

    def paging(self) -> Paging:
        from kvplan.sim.paging import Paging

        return Paging(self.trace.block_tokens, self.unit_tokens)

    def admitted(self, requests: Iterator[Request], refused: Refused) -> Iterator[Request]:
        """The requests the engine runs; those it rejects for their length are counted in ``refused``."""
        refused.context_tokens = self.context.context_tokens if self.context is not None else None
        return admitted(requests, self.context, refused)


def semantics_text(cfg: SimConfig, engine_version: str = "") -> str:
    """The semantics in words, for the report."""
    ver = f" {engine_version}" if engine_version else ""
    if cfg.semantics == "ideal":
        how = (
            "leaf-LRU over the prefix trie (only leaves evicted, the running request's path protected)"
            if cfg.policy == "lru"
            else "block FIFO (insertion order, hits do not refresh)"
        )
        return (
            f"ideal (the published studies' and kvcache.ai's): the trace's own {cfg.trace.block_tokens}-token blocks, "
            f"{how}"
        )
    if cfg.semantics == "sglang":
        return (
            f"SGLang{ver} radix cache: {cfg.unit_tokens}-token pages, matches rounded down to whole pages, "
            f"{cfg.policy} eviction of unlocked leaves (whole nodes), running requests lock their path"
            + (", EAGLE bigram keys" if cfg.eagle else "")
        )
    return (
        f"vLLM{ver} block pool: {cfg.unit_tokens}-token blocks + the null block, hash-chain hits capped at "
        "length − 1, freed hashed blocks appended to the free queue (LRU), unhashed prepended"
        + (", EAGLE drop of one block" if cfg.eagle else "")
    )


def make_window(trace: Trace, name: str) -> Window:
    if name not in WINDOWS:
        raise InputError(f"--window {name!r}: use one of {', '.join(WINDOWS)}")
    if name == "all":
        return Window("all", 0)
    return Window("last50", trace.count() // 2)


def run_one(cfg: SimConfig, progress: Progress | None = None, parsed: CompactTrace | None = None) -> SimResult:
    """One replay at one capacity (from the trace file, or from its parsed form)."""
    refused = Refused()
    if parsed is not None:
        result = _run(cfg, cfg.admitted(parsed.read(), refused), progress)
        result.bad_records = parsed.bad
    else:
        stats = ReadStats()
        result = _run(cfg, cfg.admitted(cfg.trace.read(stats), refused), progress)
        result.bad_records = stats.bad
    result.refused = refused
    return result


def _run(cfg: SimConfig, requests: Iterator[Request], progress: Progress | None) -> SimResult:
    if cfg.semantics == "ideal":
        return ideal.replay(
            requests,
            block_tokens=cfg.trace.block_tokens,
            capacity=cfg.capacity_units,
            policy=cfg.policy,
            window=cfg.window,
            check=cfg.check,
            progress=progress,
        )
    from kvplan.sim.replay import replay_occupancy, replay_order

    if cfg.occupancy:
        return replay_occupancy(
            requests, cfg.pool(), cfg.paging(), service=cfg.service, window=cfg.window, progress=progress
        )
    return replay_order(requests, cfg.pool(), cfg.paging(), window=cfg.window, progress=progress)


_PARSED: CompactTrace | None = None
"""The trace a per-capacity sweep parsed once; its forked workers inherit it."""


def _point(cfg: SimConfig) -> tuple[SweepPoint, SimResult]:
    r = run_one(cfg, parsed=_PARSED)
    assert r.capacity_units is not None
    p = SweepPoint(
        r.capacity_units, r.stats.hit_tokens, r.stats.hit_units, r.filled_before_window, r.evictions,
        r.peak_used_units, filled=r.filled_at is not None,
    )  # fmt: skip
    r.stats.lengths = type(r.stats.lengths)("q")  # the curve keeps totals only: do not ship per-request lists back
    return p, r


def run_sweep(cfg: SimConfig, capacities: list[int], *, jobs: int = 0, progress: Progress | None = None) -> Sweep:
    """Hit rates at several capacities (units) over the same measured requests."""
    caps = sorted(set(capacities))
    if cfg.semantics == "ideal" and cfg.policy == "lru" and not cfg.check:
        stats, refused = ReadStats(), Refused()
        curve = ideal.lru_curve(
            cfg.admitted(cfg.trace.read(stats), refused), block_tokens=cfg.trace.block_tokens, capacities=caps,
            window=cfg.window, progress=progress,
        )  # fmt: skip
        curve.bad_records, curve.refused = stats.bad, refused
        return curve
    if cfg.semantics == "ideal" and not cfg.check:
        stats, refused = ReadStats(), Refused()
        curve = ideal.fifo_curve(
            cfg.admitted(cfg.trace.read(stats), refused), block_tokens=cfg.trace.block_tokens, capacities=caps,
            window=cfg.window, progress=progress,
        )  # fmt: skip
        curve.bad_records, curve.refused = stats.bad, refused
        return curve
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    configs = [replace(cfg, capacity_units=c) for c in caps]
    workers = min(jobs or os.cpu_count() or 1, len(configs))
    results: list[tuple[SweepPoint, SimResult]] = []
    global _PARSED
    _PARSED = CompactTrace(cfg.trace) if len(configs) > 1 else None
    try:
        if workers <= 1:
            for i, c in enumerate(configs, 1):
                results.append(_point(c))
                if progress is not None:
                    progress(i)
        else:
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
                for i, res in enumerate(pool.map(_point, configs), 1):
                    results.append(res)
                    if progress is not None:
                        progress(i)
    finally:
        _PARSED = None
    first = results[0][1]
    return Sweep(
        semantics=cfg.semantics,
        policy=cfg.policy,
        window=cfg.window.name,
        window_start=cfg.window.start,
        requests=first.requests,
        unit=first.unit,
        unit_tokens=first.unit_tokens,
        measured_tokens=first.stats.measured_tokens,
        measured_units=first.stats.measured_units,
        points=[p for p, _ in results],
        method=f"one replay per capacity ({workers} process{'es' if workers > 1 else ''})",
        input_tokens=first.input_tokens,
        bad_records=first.bad_records,
        refused=first.refused,
    )


# --------------------------------------------------------------------------- capacities on the command line

_UNIT_RE = re.compile(r"^\s*(.+?)\s*(pages?|blocks?)\s*$", re.IGNORECASE)
_BYTES_RE = re.compile(r"[0-9.]\s*[KMGT]?i?B\s*$", re.IGNORECASE)


def parse_count(text: str, name: str = "capacity") -> int:
    """A token count: ``3M`` / ``128K`` (binary, as everywhere in kvplan), ``3000000`` or ``1e6`` / ``2.5e6``,
    at most ``limits.MAX_TOKENS``."""
    t = str(text).strip().replace("_", "")
    if _LONG_DIGITS.search(t):
        raise limits.LimitError(f"{name} {_shown(text)}: a number of more than {limits.MAX_INT_DIGITS} digits")
    if re.fullmatch(r"[0-9.]+[eE][+]?[0-9]{1,6}", t):
        try:
            d = Decimal(t)
        except InvalidOperation:
            raise InputError(f"{name} {_shown(text)} is not a count") from None
        if d.adjusted() > limits.MAX_INT_DIGITS:
            raise limits.LimitError(
                f"{name} {_shown(text)} is above the largest count kvplan accepts ({limits.MAX_TOKENS:,})"
            )
        if d != d.to_integral_value():
            raise InputError(f"{name} {_shown(text)} is not a whole number")
        n = int(d)
    else:
        n = parse_tokens(t)
    return limits.bounded_int(n, name=f"{name} {_shown(text)}", low=0, high=limits.MAX_TOKENS)


_LONG_DIGITS = re.compile(rf"[0-9]{{{limits.MAX_INT_DIGITS + 1}}}")


def _shown(text: str) -> str:
    t = str(text).strip()
    return repr(t if len(t) <= 40 else t[:20] + "…")


@dataclass(frozen=True)
class CapacityScale:
    """How command-line capacities become units: tokens per unit, and bytes per unit where a plan says."""

    unit_tokens: int
    unit: str
    """'block' or 'page'."""
    bytes_per_token_num: int = 0
    bytes_per_token_den: int = 1
    """Bytes one logical token takes on one GPU, as a fraction (0: unknown, no byte capacities)."""


def parse_capacity(text: str, scale: CapacityScale) -> int | None:
    """'3M' / '1e6' tokens, '6000 pages' / '6000 blocks', '40GiB' (per GPU, needs a plan), 'inf' -> units."""
    t = str(text).strip()
    if t.lower() in ("inf", "infinite", "unbounded"):
        return None
    m = _UNIT_RE.match(t)
    if m:
        n = parse_count(m.group(1))
        word = m.group(2).lower().rstrip("s")
        if word != scale.unit and not (scale.unit == "page" and word == "block"):
            raise InputError(
                f"capacity {text!r}: this simulation counts {scale.unit}s of {scale.unit_tokens} tokens, not {word}s"
            )
        return n
    if _BYTES_RE.search(t):
        b = parse_bytes(t)
        if not scale.bytes_per_token_num:
            raise InputError(f"capacity {text!r}: bytes need a plan's bytes per token (give --deploy or --model)")
        tokens = b * scale.bytes_per_token_den // scale.bytes_per_token_num
        limits.bounded_int(tokens, name=f"capacity {_shown(text)} in tokens", low=0, high=limits.MAX_TOKENS)
        return tokens // scale.unit_tokens
    return parse_count(t) // scale.unit_tokens


def parse_sweep(text: str, scale: CapacityScale, points: int = DEFAULT_SWEEP_POINTS) -> list[int]:
    """'1e4..5e7' (``points`` log-spaced token capacities) or a comma list of capacities -> units."""
    t = str(text).strip()
    if ".." in t:
        lo_s, _, hi_s = t.partition("..")
        lo, hi = parse_count(lo_s, "--sweep"), parse_count(hi_s, "--sweep")
        if not 0 < lo < hi:
            raise InputError(f"--sweep {text!r}: write LOW..HIGH in tokens with 0 < LOW < HIGH, e.g. 1e4..5e7")
        limits.bounded_int(points, name="--points", low=2, high=limits.MAX_LOOP)
        step = math.log(hi / lo) / (points - 1)
        tokens = [round(lo * math.exp(step * i)) for i in range(points)]
        tokens[-1] = hi
        units = [x // scale.unit_tokens for x in tokens]
    else:
        items = [x for x in t.split(",") if x.strip()]
        if not items:
            raise InputError("--sweep: empty list of capacities")
        limits.bounded_int(len(items), name="--sweep: the number of capacities", low=1, high=limits.MAX_LOOP)
        units = []
        for x in items:
            u = parse_capacity(x, scale)
            if u is None:
                raise InputError("--sweep: an unbounded capacity is the curve's plateau; list finite ones")
            units.append(u)
    return sorted(set(units))

"""Records -> events: each line's pattern matched and its fact built, with the phase each kind belongs to."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.runbook.parse.lines import SGLANG_LINES, VLLM_LINES, LineForm
from kvplan.runbook.parse.records import _Record

CONFIG = "config"
LOAD = "load"
POOL = "pool"
_PHASE = {
    "args": CONFIG,
    "version": CONFIG,
    "engine_config": CONFIG,
    "cli_args": CONFIG,
    "baseline": LOAD,
    "load_begin": LOAD,
    "load_end": LOAD,
    "model_loading": LOAD,
    "kv": POOL,
    "pool_end": POOL,
    "summary": POOL,
    "available": POOL,
    "kv_size": POOL,
    "concurrency": POOL,
    "override": POOL,
    "dcp": POOL,
    "maxlen_error": POOL,
    "error": POOL,
    "kv_sizes": POOL,
    "v0_blocks": POOL,
    "v0_profile": POOL,
    "v0_budget": POOL,
    "v0_terms": POOL,
    "v0_maxlen_error": POOL,
    "negative_profile": POOL,
    "v0_row": POOL,
    "mamba": POOL,
    "total_tokens": POOL,
    "swa_sizes": POOL,
    "swa_pool": POOL,
    "hybrid_block": CONFIG,
    "mamba_padding": CONFIG,
    "long_context": CONFIG,
    "page": CONFIG,
    "dsa_dtype": CONFIG,
    "dsa_backends": CONFIG,
}
_RESTART_ON_REPEAT = {"args", "version", "engine_config", "cli_args", "load_begin", "load_end", "model_loading",
                      "summary", "available", "kv_size", "override", "pool_end", "v0_blocks", "v0_profile",
                      "v0_budget", "v0_terms"}  # fmt: skip
_SAME_AGAIN = {"kv_size", "available"}
"""vLLM's pool lines repeated with the same figure and no load line between: one start printed twice."""
_NEUTRAL = {"profiling_override"}
"""Kinds that never begin a new start (a line printed inside another phase)."""
_QUOTES = "'\"`‘“«"


@dataclass(frozen=True)
class _Event:
    kind: str
    engine: str
    pos: int
    line: int
    rank: str | None
    value: object


def _read_order() -> tuple[tuple[str, LineForm], ...]:
    """Each (engine, pattern, reader) of the line tables once, in table order (rows that share a pattern share a
    reader: one read a match however many forms the line has)."""
    seen: set[tuple[str, int, int]] = set()
    out: list[tuple[str, LineForm]] = []
    for engine, rows in (("sglang", SGLANG_LINES), ("vllm", VLLM_LINES)):
        for row in rows:
            key = (engine, id(row.pattern), id(row.fact))
            if key not in seen:
                seen.add(key)
                out.append((engine, row))
    return tuple(out)


_READ = _read_order()


def _events(rec: _Record) -> list[_Event]:
    """Every fact of one record, in the order its lines begin."""
    t = rec.text
    out: list[_Event] = []
    for engine, row in _READ:
        for m in (row.pattern.search(t),) if row.once else row.pattern.finditer(t):
            if m is None or (m.start() > 0 and t[m.start() - 1] in _QUOTES):
                continue  # a line quoted inside another one (a note, an issue title, a header): not an event
            out.extend(_Event(kind, engine, m.start(), rec.line, rec.rank, value) for kind, value in row.fact(m, t))
    out.sort(key=lambda e: e.pos)
    return out

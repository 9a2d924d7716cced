"""The doctor's memory chain of one GPU, term by term: rows and JSON."""

from __future__ import annotations

from typing import Any

from kvplan.render import Section, size
from kvplan.runbook.memory_chain import MemoryChain


def chain_section(chain: MemoryChain) -> Section:
    rows: list[tuple[str, ...]] = []
    for t in chain.terms:
        log = size(t.log_low) if t.log_high - t.log_low <= 0 else f"{size(t.log_low)} – {size(t.log_high)}"
        ok = "ok" if t.agrees else f"DIFFERS by {size(abs(t.delta))}"
        where = f"{t.how}, line {t.line}" if t.line is not None else t.how
        rows.append((t.name, log, size(t.plan), ok, where))
    title = f"Memory chain of one GPU, term by term ({chain.gpu}, {size(chain.total_bytes)})"
    if not chain.fits_gpu:
        title += ": the log's free memory exceeds this GPU's total, so the log is from another GPU"
    return Section(title, tuple(rows), ("term", "log", "plan", "agrees", "from"))


def held_text(chain: MemoryChain | None) -> str:
    """The headline's clause when the memory held before loading is the term that differs."""
    if chain is None or not chain.fits_gpu or chain.held.agrees or chain.held.plan >= chain.held.log_low:
        return ""
    t = chain.held
    return (
        f": the server held {size(t.log_low)} of the {chain.gpu}'s {size(chain.total_bytes)} before loading "
        f"({t.how}, line {t.line}) where the plan assumes {size(t.plan)}; "
        "the pool loses that difference × mem_fraction_static"
    )


def chain_data(chain: MemoryChain | None) -> dict[str, Any] | None:
    if chain is None:
        return None
    return {
        "gpu": chain.gpu,
        "total_bytes": chain.total_bytes,
        "fits_gpu": chain.fits_gpu,
        "terms": [
            {
                "name": t.name,
                "how": t.how,
                "log_low_bytes": t.log_low,
                "log_high_bytes": t.log_high,
                "plan_bytes": t.plan,
                "line": t.line,
                "agrees": t.agrees,
            }
            for t in chain.terms
        ],
    }

"""The occupancy mode's service-time model, apart from the replay so that a run without occupancy (``ideal``
semantics, a curve) does not load the engine replays to build its configuration."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Service:
    """The occupancy-mode service-time model."""

    prefill_tps: int = 10_000
    """Prefill tokens per second of one request."""
    tpot_us: int = 40_000
    """Decode time per output token, microseconds."""
    max_running: int | None = None
    """Running requests at most (None: no limit but memory)."""

    def describe(self) -> str:
        limit = f"at most {self.max_running:,} running" if self.max_running else "no running-request limit"
        return (
            f"prefill {self.prefill_tps:,} tokens/s per request (uncached tokens only), decode "
            f"{self.tpot_us / 1000:g} ms per token, {limit}; FCFS admission, newest-first recompute preemption"
        )

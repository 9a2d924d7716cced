"""A log whose pool lies inside the band of a config-alone plan is within the expected error of that plan (its
memory outside the pool modelled, not read: kvplan.engines.band), not a mismatch to explain with a fitted cause."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.band import end_plans, terms_of
from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.runbook.doctor.pool import _measure
from kvplan.runbook.doctor.results import LoggedPool


@dataclass(frozen=True)
class LogBand:
    """The config-alone plan's band in the unit of the logged figure, and what it rests on."""

    low: int
    high: int
    why: str

    def holds(self, value: int, slack: int = 0) -> bool:
        return self.low - slack <= value <= self.high + slack


def config_alone_band(arch: ModelArch, plan: PoolPlan, pool: LoggedPool) -> LogBand | None:
    """The band of ``plan`` measured as the log measures its pool; None where nothing is estimated or the figure
    is not a pool size (vLLM's 'needed' bytes of a refused start)."""
    if pool.unit == "needed":
        return None
    ends = end_plans(plan, arch)
    if ends is None:
        return None
    low, high = sorted(_measure(p, pool) for p in ends)
    why = ", ".join(f"{t.label} estimated {t.percent}" for t in terms_of(plan) if t.source == "estimate" and t.ppm)
    return LogBand(low, high, why)

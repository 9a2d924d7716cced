"""fit --pd with SLAs: each side of a prefill / decode split priced against its own requirements (pure).

- The decode side is sized by TPOT and throughput: the closed loop of the SLA's clients on the decode instance, each
  request arriving prefilled (its KV handed off), so its steps are its decodes alone (kvplan.perf.predict,
  ``phase="decode"``).
- The prefill side is sized by TTFT: the same clients, whose requests end there at their first token and who send
  the next one the decode time of a request later (the decode side's best: median end to end less median TTFT; the
  hand-off not counted in it, so the prefill side is loaded a little more than it would be); its TTFT plus the KV
  hand-off of one request (kvplan.plan.fit_sla.hand_off_band: kvplan.plan.transfer's pages at ``--link``).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.models.arch import ModelArch
from kvplan.plan.fit import Fit, FitQuery, fit


def decode_time_s(decode: Fit) -> float | None:
    """Seconds a request spends on the decode side's best (median end to end less median TTFT); None when no decode
    instance was priced."""
    best = decode.best
    if best is None or best.sla is None or best.sla.perf is None:
        return None
    us = best.sla.perf.us
    return max(us["e2e"].value - us["ttft"].value, 0) / 1e6


def pd_fits(arch: ModelArch, q: FitQuery, prefill_q: FitQuery, link: str) -> tuple[Fit, Fit, float | None]:
    """(prefill, decode, the prefill side's clients' think time): the decode side searched first, its best's decode
    time setting the prefill side's load; without a decode instance the prefill side keeps its memory requirement
    only (think time None)."""
    assert q.sla is not None
    decode = fit(arch, replace(q, sla=replace(q.sla, side="decode", cache={})))
    think = decode_time_s(decode)
    sla = replace(q.sla, side="prefill", think_s=think, link=link, cache={}) if think is not None else None
    return fit(arch, replace(prefill_q, sla=sla)), decode, think

"""fit's SLA options read into a SlaSpec (kvplan.plan.fit_sla): the requirements, the statistic and the load."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kvplan import limits
from kvplan.cli.perf import MAX_CONCURRENCY, MAX_OSL
from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.plan.fit_sla import SlaSpec
from kvplan.units import parse_duration_us, parse_option_tokens, parse_per_s

if TYPE_CHECKING:
    from kvplan.cli._fit import FitOptions


def sla_spec(o: FitOptions, req: Requirements) -> tuple[SlaSpec | None, Requirements]:
    """The SLA (None without --require-ttft / -tpot / -throughput) and the memory requirements: where none was
    given, the pool must hold the SLA's clients at once (--concurrency N@isl+osl, as `fit` checks any N@CTX)."""
    if not (o.require_ttft or o.require_tpot or o.require_throughput):
        return None, req
    if o.at not in ("median", "p90"):
        raise InputError(f"--at {o.at!r}: choose median or p90")
    ttft = parse_duration_us("--require-ttft", o.require_ttft) if o.require_ttft else None
    tpot = parse_duration_us("--require-tpot", o.require_tpot) if o.require_tpot else None
    tput = parse_per_s("--require-throughput", o.require_throughput) if o.require_throughput else None
    if o.isl is None or o.osl is None:
        raise InputError("an SLA is priced under a load: give --isl and --osl (tokens a request)")
    isl, osl = parse_option_tokens("--isl", o.isl), parse_option_tokens("--osl", o.osl)
    limits.bounded_int(osl, name="--osl", low=1, high=MAX_OSL)
    conc = o.concurrency if o.concurrency is not None else next((n for n, _ in req.concurrency), None)
    if conc is None:
        raise InputError("an SLA is priced under a load: give --concurrency N (clients) or --require-concurrency N@CTX")
    limits.bounded_int(conc, name="--concurrency", low=1, high=MAX_CONCURRENCY)
    if req.min_ctx_tokens is None and not req.concurrency:
        req = replace(req, concurrency=((conc, isl + osl),))
    a = o.acceptance_length
    if a is not None and not 1.0 <= limits.finite(a, name="--acceptance-length") <= 64:
        raise InputError(f"--acceptance-length {a:g}: a mean of tokens a verify step yields, at least 1")
    r = o.range_ratio
    if not 0 <= limits.finite(r, name="--range-ratio") <= 1:
        raise InputError(f"--range-ratio {r:g}: a share in [0, 1] of --isl and --osl")
    spec = SlaSpec(isl=isl, osl=osl, concurrency=conc, ttft_us=ttft, tpot_us=tpot, output_tokens_per_s=tput, at=o.at,
                   acceptance_length=a, range_ratio=r)  # fmt: skip
    return spec, req

"""`kvplan perf --trace FILE`: the trace read with `kvplan simulate`'s readers (kvplan.sim.trace) into the requests
perf prices (kvplan.perf.trace_loop), the output length assumed where the trace has none said."""

from __future__ import annotations

import itertools

from kvplan.errors import InputError
from kvplan.perf.trace_loop import Arrival, TraceLoad
from kvplan.sim.trace import open_trace


def read_trace(path: str, fmt: str | None, requests: int, osl: int | None) -> TraceLoad:
    """The first ``requests`` requests of the trace in arrival order; a request without an output length (0: Azure
    and kvplan traces may leave it out) takes ``osl``, and without ``osl`` the read stops with one line naming it."""
    trace = open_trace(path, fmt)
    taken = list(itertools.islice(trace.read(), requests + 1))
    if not taken:
        raise InputError(f"trace {path}: no requests")
    more = len(taken) > requests
    taken = taken[:requests]
    assumed = 0
    out: list[Arrival] = []
    for r in sorted(taken, key=lambda r: r.arrival_us):  # stable: trace order among equal times
        where = trace.where(r)
        if r.input_tokens < 1:
            raise InputError(f"{where}: a request of 0 input tokens: perf cannot price it")
        o = r.output_tokens
        if o < 1:
            if osl is None:
                raise InputError(f"{where}: no output length in the trace: give --osl N (assumed for such requests)")
            o, assumed = osl, assumed + 1
        out.append(Arrival(arrival_us=r.arrival_us, isl=r.input_tokens, osl=o, where=where))
    said = f"{path} ({trace.describe()}), {'the first' if more else 'all'} {len(out):,} requests"
    if assumed:
        said += f"; {assumed:,} without an output length take --osl {osl:,} (assumed)"
    return TraceLoad(arrivals=tuple(out), source=said)

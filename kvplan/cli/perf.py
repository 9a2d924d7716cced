from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.render import OutputFormat, emit

if TYPE_CHECKING:
    from kvplan.perf.trace_loop import TraceLoad

MAX_CONCURRENCY = 65_536
MAX_OSL = 262_144
DEFAULT_TRACE_REQUESTS = 1_000
MAX_TRACE_REQUESTS = 20_000


def perf(
    ctx: typer.Context,
    isl: Annotated[
        str | None, typer.Option("--isl", metavar="TOKENS", help="Input tokens a request: 8K or an exact count.")
    ] = None,
    osl: Annotated[
        str | None,
        typer.Option("--osl", metavar="TOKENS", help="Output tokens a request (--trace: for requests without one)."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Closed-loop clients (bench_serving --max-concurrency).")
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option("--rate", metavar="R/s", help="Open loop: Poisson arrivals a second, e.g. 2.5/s (seeded)."),
    ] = None,
    trace: Annotated[
        str | None,
        typer.Option("--trace", metavar="FILE", help="An arrival trace (the formats `kvplan simulate` reads)."),
    ] = None,
    trace_format: Annotated[
        str | None, typer.Option("--trace-format", help="mooncake, kvtester, azure or kvplan [default: detected].")
    ] = None,
    requests: Annotated[
        int, typer.Option("--requests", metavar="N", help="--trace: price its first N requests.")
    ] = DEFAULT_TRACE_REQUESTS,
    acceptance_length: Annotated[
        float | None,
        typer.Option(
            "--acceptance-length",
            metavar="A",
            help="MTP / EAGLE: mean tokens a verify step yields (SGLang bench's accept length) [default: per family].",
        ),
    ] = None,
    range_ratio: Annotated[
        float,
        typer.Option(
            "--range-ratio",
            metavar="R",
            help="Lengths uniform in [R × --isl, --isl] and [R × --osl, --osl], as SGLang bench_serving "
            "--random-range-ratio R draws them (its default 0) [default: 1, fixed lengths as aiperf runs them].",
        ),
    ] = 1.0,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """TTFT, TPOT, end-to-end latency and tokens/s per GPU under a closed-loop concurrency, an arrival rate or trace.

    Examples: kvplan perf -d glm-5.3-8xh200-sglang --isl 8K --osl 1K --concurrency 64;
    kvplan perf -d glm-5.3-8xh200-vllm --isl 1K --osl 1K --rate 4/s;
    kvplan perf -d glm-5.3-8xh200-vllm --trace conversation_trace.jsonl --requests 500
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.perf.predict import perf as run_perf
        from kvplan.render.perf_report import perf_report

        if not 0 <= range_ratio <= 1 or (trace is not None and range_ratio != 1):
            raise InputError("--range-ratio is a share in [0, 1] of --isl and --osl (a trace has its own lengths)")
        n_isl, n_osl, rate_per_s, load = _load(
            ctx, isl, osl, concurrency, rate, trace, trace_format, requests, acceptance_length
        )
        plan = load_plan(model, deploy, set_)
        try:
            result = run_perf(plan.arch, plan, isl=n_isl, osl=n_osl or 1, concurrency=concurrency,
                              acceptance_length=acceptance_length, rate_per_s=rate_per_s, trace=load,
                              range_ratio=range_ratio)  # fmt: skip
        except ValueError as e:
            raise InputError(str(e)) from None
        emit(perf_report(result), fmt)


def _load(
    ctx: typer.Context,
    isl: str | None,
    osl: str | None,
    concurrency: int | None,
    rate: str | None,
    trace: str | None,
    trace_format: str | None,
    requests: int,
    acceptance_length: float | None,
) -> tuple[int, int | None, float | None, TraceLoad | None]:
    """The load perf prices, checked: (isl, osl, requests a second, the trace read); one line for a bad one."""
    from kvplan import limits
    from kvplan.cli._once import needs
    from kvplan.cli._perf_trace import read_trace
    from kvplan.errors import InputError
    from kvplan.units import parse_option_tokens as tokens
    from kvplan.units import parse_request_rate

    for option in ("--trace-format", "--requests"):  # they describe the trace's read
        needs(ctx, option, option[2:].replace("-", "_"), "--trace", trace is not None)
    if (concurrency is not None) + (rate is not None) + (trace is not None) != 1:
        raise InputError("perf prices one load: give --concurrency N (closed loop), --rate R/s (open loop) or "
                         "--trace FILE")  # fmt: skip
    if trace is not None and isl is not None:
        raise InputError("--trace takes each request's input length from the trace: leave out --isl")
    if trace is None and (isl is None or osl is None):
        raise InputError("--concurrency and --rate price requests of one length: give --isl and --osl")
    n_isl = tokens("--isl", isl) if isl is not None else 1
    n_osl = tokens("--osl", osl) if osl is not None else None
    rate_per_s = parse_request_rate("--rate", rate) if rate is not None else None
    if min(n_isl, n_osl or 1, concurrency or 1) < 1:
        raise InputError("--isl, --osl and --concurrency must be at least 1")
    limits.bounded_int(requests, name="--requests", low=1, high=MAX_TRACE_REQUESTS)
    if acceptance_length is not None:
        limits.finite(acceptance_length, name="--acceptance-length")
    if (concurrency or 0) > MAX_CONCURRENCY or (n_osl or 0) > MAX_OSL:  # the schedule is priced step by step
        raise InputError(f"perf prices up to --concurrency {MAX_CONCURRENCY:,} and --osl {MAX_OSL:,} tokens")
    load = read_trace(trace, trace_format, requests, n_osl) if trace is not None else None
    if load is not None:
        n = len(load.arrivals)
        n_isl, n_osl = -(-load.isl_sum // n), -(-load.osl_sum // n)
        if max(a.osl for a in load.arrivals) > MAX_OSL:
            raise InputError(f"perf prices up to {MAX_OSL:,} output tokens a request")
    return n_isl, n_osl, rate_per_s, load

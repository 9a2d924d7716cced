from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.render import OutputFormat, emit

MAX_CONCURRENCY = 65_536
MAX_OSL = 262_144


def perf(
    isl: Annotated[str, typer.Option("--isl", metavar="TOKENS", help="Input tokens a request: 8K or an exact count.")],
    osl: Annotated[str, typer.Option("--osl", metavar="TOKENS", help="Output tokens a request.")],
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Closed-loop clients (bench_serving --max-concurrency).")
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option("--rate", metavar="R/s", help="Open loop: Poisson arrivals a second, e.g. 2.5/s (seeded)."),
    ] = None,
    acceptance_length: Annotated[
        float | None,
        typer.Option(
            "--acceptance-length",
            metavar="A",
            help="MTP / EAGLE: mean tokens a verify step yields (SGLang bench's accept length) [default: per family].",
        ),
    ] = None,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """TTFT, TPOT, end-to-end latency and tokens/s per GPU under a closed-loop concurrency or an arrival rate.

    Examples: kvplan perf -d glm-5.3-8xh200-sglang --isl 8K --osl 1K --concurrency 64;
    kvplan perf -d glm-5.3-8xh200-vllm --isl 1K --osl 1K --rate 4/s
    """
    with boundary():
        from kvplan import limits
        from kvplan.errors import InputError
        from kvplan.perf.predict import perf as run_perf
        from kvplan.render.perf_report import perf_report
        from kvplan.units import parse_option_tokens as tokens
        from kvplan.units import parse_request_rate

        n_isl, n_osl = tokens("--isl", isl), tokens("--osl", osl)
        if (concurrency is None) == (rate is None):
            raise InputError("perf prices one load: give --concurrency N (closed loop) or --rate R/s (open loop)")
        rate_per_s = parse_request_rate("--rate", rate) if rate is not None else None
        if min(n_isl, n_osl, concurrency or 1) < 1:
            raise InputError("--isl, --osl and --concurrency must be at least 1")
        if acceptance_length is not None:
            limits.finite(acceptance_length, name="--acceptance-length")
        if (concurrency or 0) > MAX_CONCURRENCY or n_osl > MAX_OSL:  # the schedule is priced step by step
            raise InputError(f"perf prices up to --concurrency {MAX_CONCURRENCY:,} and --osl {MAX_OSL:,} tokens")
        plan = load_plan(model, deploy, set_)
        try:
            result = run_perf(plan.arch, plan, isl=n_isl, osl=n_osl, concurrency=concurrency,
                              acceptance_length=acceptance_length, rate_per_s=rate_per_s)  # fmt: skip
        except ValueError as e:
            raise InputError(str(e)) from None
        emit(perf_report(result), fmt)

"""fit's steps: the options checked and read into a query, the search (one instance or a PD split), its outputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvplan import limits
from kvplan.cli._common import print_launch
from kvplan.cli._fit_sla import sla_spec
from kvplan.cli.gate import option_requirements
from kvplan.errors import EXIT_OK, EXIT_REJECTED, InputError
from kvplan.fsio import check_outputs, write_atomic
from kvplan.models.deploy import ENGINES
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.fit import FitQuery
from kvplan.plan.fit import fit as run_fit
from kvplan.plan.fit_pd import fit_pd
from kvplan.plan.fit_pd_sla import pd_fits
from kvplan.plan.fit_trace import TraceSpec, trace_spec, with_trace
from kvplan.render import OutputFormat, emit
from kvplan.render.fit_report import deploy_yaml, fit_report, pd_report, plot_fit
from kvplan.sim.trace import open_trace
from kvplan.units import parse_link


@dataclass(frozen=True)
class FitOptions:
    """fit's options as typed."""

    model: str
    require_ctx: str | None
    require_concurrency: list[str] | None
    gpu: str
    engine: str
    max_gpus: int
    gpus_per_node: int
    mtp: str
    pd: bool
    link: str
    pd_backend: str | None
    pd_staging: bool
    exhaustive: bool
    trace: Path | None
    trace_format: str | None
    min_hit: float | None
    prefill_tps: int
    tpot_ms: float
    emit_deploy: Path | None
    plot: Path | None
    emit_command: str | None
    require_ttft: str | None = None
    require_tpot: str | None = None
    require_throughput: str | None = None
    at: str = "median"
    isl: str | None = None
    osl: str | None = None
    concurrency: int | None = None
    acceptance_length: float | None = None
    range_ratio: float = 1.0


def run(o: FitOptions, fmt: OutputFormat) -> int:
    """The search and its outputs (the report, --emit-deploy, --plot, --emit-command); the exit code."""
    q, reads = _query(o)
    if o.pd:
        return _run_pd(o, q, fmt)
    if o.pd_backend is not None or o.pd_staging:
        raise InputError("--pd-backend and --pd-staging describe a prefill/decode split: add --pd")
    result = run_fit(load_model(o.model), q)
    best = result.best
    if o.emit_deploy is not None and best is not None:
        write_atomic(o.emit_deploy, deploy_yaml(best), "--emit-deploy", reads)
    if o.plot is not None:
        plot_fit(result, o.plot, reads)
    if o.emit_command is not None and best is not None and best.plan is not None:
        print_launch(best.plan, q.model_ref, "fit", fmt)  # the best candidate's command, not the report
        return EXIT_OK
    emit(fit_report(result, str(o.emit_deploy) if o.emit_deploy is not None and best is not None else None), fmt)
    return EXIT_OK if best is not None else EXIT_REJECTED


def _query(o: FitOptions) -> tuple[FitQuery, list[Path]]:
    """The search space and the requirements, every option checked before any planning; the files read."""
    req = option_requirements(o.require_ctx, o.require_concurrency)
    spec = _trace(o.trace, o.trace_format, o.min_hit, o.prefill_tps, o.tpot_ms) if o.trace is not None else None
    if o.trace is None and o.min_hit is not None:
        raise InputError("--min-hit needs --trace (the hit rate is the trace's, replayed through each pool)")
    if spec is not None:
        req = with_trace(req, spec)
    sla, req = sla_spec(o, req)
    engines = _names("--engine", o.engine)
    if o.emit_command not in (None, "auto"):  # the launch command of the best candidate of that engine
        if o.emit_command not in engines:
            raise InputError(f"--emit-command {o.emit_command!r}: choose auto or an engine --engine searches")
        engines = (o.emit_command,)
    for e in engines:
        if e not in ENGINES:
            raise InputError(f"--engine {e!r}: choose from {', '.join(ENGINES)}")
    if o.mtp not in ("off", "on", "both"):
        raise InputError(f"--mtp {o.mtp!r}: choose off, on or both")
    limits.bounded_int(o.max_gpus, name="--max-gpus", low=1, high=limits.MAX_FIT_GPUS)
    limits.bounded_int(o.gpus_per_node, name="--gpus-per-node", low=1, high=limits.MAX_GPUS)
    gpus = tuple(find_gpu(g) for g in _names("--gpu", o.gpu))
    reads = check_outputs([("--emit-deploy", o.emit_deploy), ("--plot", o.plot)], [o.model, o.trace])
    q = FitQuery(
        model_ref=str(Path(o.model).resolve()) if any(c in o.model for c in "/\\") else o.model,
        gpus=gpus,
        engines=engines,
        requirements=req,
        max_gpus=o.max_gpus,
        gpus_per_node=o.gpus_per_node,
        mtp={"off": (False,), "on": (True,), "both": (False, True)}[o.mtp],
        exhaustive=o.exhaustive,
        trace=spec,
        sla=sla,
    )
    return q, reads


def _run_pd(o: FitOptions, q: FitQuery, fmt: OutputFormat) -> int:
    """A prefill and a decode instance sized separately (no file outputs, no trace replay yet)."""
    if o.emit_deploy is not None or o.plot is not None or o.emit_command is not None:
        raise InputError("--pd writes no --emit-deploy, --emit-command or --plot yet: run fit without --pd for those")
    if q.trace is not None:
        raise InputError("--pd does not replay a --trace yet: run fit --trace without --pd")
    parse_link(o.link)  # a malformed speed is bad input before the search
    split = fit_pd(load_model(o.model), q, link=o.link, backend=o.pd_backend, sglang_staging=o.pd_staging,
                   sides=pd_fits if q.sla is not None else None)  # fmt: skip
    emit(pd_report(split), fmt)
    return EXIT_OK if split.prefill.best and split.decode.best else EXIT_REJECTED


def _names(option: str, text: str) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not items:
        raise InputError(f"{option} is empty: give a comma-separated list")
    return items


def _trace(path: Path, fmt: str | None, min_hit: float | None, prefill_tps: int, tpot_ms: float) -> TraceSpec:
    """--trace and its options, the trace read once (malformed: exit 2 before any search)."""
    hit = 0.0 if min_hit is None else limits.finite(min_hit, name="--min-hit")
    if not 0.0 <= hit <= 1.0:
        raise limits.LimitError(f"--min-hit {min_hit!r}: a hit rate between 0 and 1, e.g. 0.4")
    limits.bounded_int(prefill_tps, name="--prefill-tps", low=1, high=limits.MAX_TOKENS)
    limits.finite(tpot_ms, name="--tpot-ms")
    if not 0 < tpot_ms <= limits.MAX_TRACE_SECONDS:
        raise limits.LimitError(f"--tpot-ms: {tpot_ms!r} must be above 0 and at most {limits.MAX_TRACE_SECONDS:,}")
    tr = open_trace(path, fmt)
    return trace_spec(
        tr, min_hit_ppm=round(hit * 1_000_000), prefill_tps=prefill_tps, tpot_us=max(1, round(tpot_ms * 1000))
    )

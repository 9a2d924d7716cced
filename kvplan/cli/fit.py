from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli._common import EmitCommandOpt, FormatOpt, boundary
from kvplan.cli.gate import ConcOpt, CtxOpt
from kvplan.errors import EXIT_OK, EXIT_REJECTED
from kvplan.render import OutputFormat, emit

if TYPE_CHECKING:
    from kvplan.plan.fit_trace import TraceSpec


def _names(option: str, text: str) -> tuple[str, ...]:
    from kvplan.errors import InputError

    items = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not items:
        raise InputError(f"{option} is empty: give a comma-separated list")
    return items


def _trace(path: Path, fmt: str | None, min_hit: float | None, prefill_tps: int, tpot_ms: float) -> TraceSpec:
    """--trace and its options, the trace read once (malformed: exit 2 before any search)."""
    from kvplan import limits
    from kvplan.plan.fit_trace import trace_spec
    from kvplan.sim.trace import open_trace

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


def fit(
    ctx: typer.Context,
    model: Annotated[
        str, typer.Option("--model", "-m", metavar="NAME|PATH", help="Model preset name, model YAML or config.json.")
    ],
    require_ctx: CtxOpt = None,
    require_concurrency: ConcOpt = None,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU types to search (catalog names, comma-separated).")] = (
        "h200,b200"
    ),
    engine: Annotated[str, typer.Option("--engine", help="Engines to search: sglang, vllm.")] = "sglang,vllm",
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Largest GPU count searched.")] = 32,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs in one node.")] = 8,
    mtp: Annotated[
        str, typer.Option("--mtp", help="MTP candidates (models with MTP layers): off, on or both.")
    ] = "both",
    pd: Annotated[
        bool, typer.Option("--pd", help="Size a prefill and a decode instance separately (disaggregation).")
    ] = False,
    link: Annotated[str, typer.Option("--link", help="PD hand-off link speed per rank, e.g. 400Gbps.")] = "400Gbps",
    pd_backend: Annotated[
        str | None,
        typer.Option(
            "--pd-backend",
            help="PD transport: mooncake or nixl (SGLang --disaggregation-transfer-backend; vLLM MooncakeConnector / "
            "NixlConnector) [default: SGLang mooncake, vLLM NixlConnector].",
        ),
    ] = None,
    pd_staging: Annotated[
        bool,
        typer.Option("--pd-staging", help="SGLang's SGLANG_DISAGG_STAGING_BUFFER=1 (heterogeneous TP; not for MLA)."),
    ] = False,
    exhaustive: Annotated[
        bool, typer.Option("--exhaustive", help="Plan every candidate up to --max-gpus (no skipping).")
    ] = False,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            metavar="FILE",
            help="A request trace (simulate's formats) each candidate's pools must hold, replayed per DP rank.",
        ),
    ] = None,
    trace_format: Annotated[
        str | None, typer.Option("--trace-format", help="mooncake, kvtester, azure or kvplan [default: detected].")
    ] = None,
    min_hit: Annotated[
        float | None, typer.Option("--min-hit", help="With --trace: the least prefix hit rate, 0..1 (e.g. 0.4).")
    ] = None,
    prefill_tps: Annotated[
        int, typer.Option("--prefill-tps", help="With --trace: prefill tokens/s of one request (uncached tokens).")
    ] = 10_000,
    tpot_ms: Annotated[float, typer.Option("--tpot-ms", help="With --trace: decode time per output token, ms.")] = 40.0,
    emit_deploy: Annotated[
        Path | None, typer.Option("--emit-deploy", metavar="FILE", help="Write the best deployment as a YAML.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", metavar="FILE.png", help="GPUs vs concurrency (kvplan-llm[plot]).")
    ] = None,
    emit_command: EmitCommandOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """The smallest deployment that meets the requirements: search GPUs, engines and layouts; exit 1 if none.

    Examples: kvplan fit --model glm-5.3 --require-ctx 1M --require-concurrency 4@128K;
    kvplan fit --model glm-5.3 --trace conversation_trace.jsonl --min-hit 0.4
    """
    with boundary():
        from kvplan import limits
        from kvplan.cli._once import needs
        from kvplan.cli.gate import option_requirements
        from kvplan.errors import InputError
        from kvplan.fsio import check_outputs, write_atomic
        from kvplan.models.deploy import ENGINES
        from kvplan.models.from_hf import load_model
        from kvplan.models.gpus import find_gpu
        from kvplan.plan.fit import FitQuery
        from kvplan.plan.fit import fit as run_fit
        from kvplan.render.fit_report import deploy_yaml, fit_report, plot_fit

        needs(ctx, "--link", "link", "--pd", pd)  # the PD hand-off speed: nothing else reads it
        for option in ("--trace-format", "--prefill-tps", "--tpot-ms"):  # they describe the trace replay
            needs(ctx, option, option[2:].replace("-", "_"), "--trace", trace is not None)
        req = option_requirements(require_ctx, require_concurrency)
        spec = _trace(trace, trace_format, min_hit, prefill_tps, tpot_ms) if trace is not None else None
        if trace is None and min_hit is not None:
            raise InputError("--min-hit needs --trace (the hit rate is the trace's, replayed through each pool)")
        if spec is not None:
            from kvplan.plan.fit_trace import with_trace

            req = with_trace(req, spec)
        engines = _names("--engine", engine)
        if emit_command not in (None, "auto"):  # the launch command of the best candidate of that engine
            if emit_command not in engines:
                raise InputError(f"--emit-command {emit_command!r}: choose auto or an engine --engine searches")
            engines = (emit_command,)
        for e in engines:
            if e not in ENGINES:
                raise InputError(f"--engine {e!r}: choose from {', '.join(ENGINES)}")
        if mtp not in ("off", "on", "both"):
            raise InputError(f"--mtp {mtp!r}: choose off, on or both")
        limits.bounded_int(max_gpus, name="--max-gpus", low=1, high=limits.MAX_FIT_GPUS)
        limits.bounded_int(gpus_per_node, name="--gpus-per-node", low=1, high=limits.MAX_GPUS)
        gpus = tuple(find_gpu(g) for g in _names("--gpu", gpu))
        reads = check_outputs([("--emit-deploy", emit_deploy), ("--plot", plot)], [model, trace])
        q = FitQuery(
            model_ref=str(Path(model).resolve()) if any(c in model for c in "/\\") else model,
            gpus=gpus,
            engines=engines,
            requirements=req,
            max_gpus=max_gpus,
            gpus_per_node=gpus_per_node,
            mtp={"off": (False,), "on": (True,), "both": (False, True)}[mtp],
            exhaustive=exhaustive,
            trace=spec,
        )
        if pd:
            if emit_deploy is not None or plot is not None or emit_command is not None:
                raise InputError(
                    "--pd writes no --emit-deploy, --emit-command or --plot yet: run fit without --pd for those"
                )
            if spec is not None:
                raise InputError("--pd does not replay a --trace yet: run fit --trace without --pd")
            from kvplan.plan.fit import fit_pd
            from kvplan.render.fit_report import pd_report
            from kvplan.units import parse_link

            parse_link(link)  # a malformed speed is bad input before the search
            split = fit_pd(load_model(model), q, link=link, backend=pd_backend, sglang_staging=pd_staging)
            emit(pd_report(split), fmt)
            raise typer.Exit(EXIT_OK if split.prefill.best and split.decode.best else EXIT_REJECTED)
        if pd_backend is not None or pd_staging:
            raise InputError("--pd-backend and --pd-staging describe a prefill/decode split: add --pd")
        result = run_fit(load_model(model), q)
        best = result.best
        if emit_deploy is not None and best is not None:
            write_atomic(emit_deploy, deploy_yaml(best), "--emit-deploy", reads)
        if plot is not None:
            plot_fit(result, plot, reads)
        if emit_command is not None and best is not None and best.plan is not None:
            from kvplan.cli._common import print_launch

            print_launch(best.plan, q.model_ref, "fit", fmt)  # the best candidate's command, not the report
            raise typer.Exit(EXIT_OK)
        emit(fit_report(result, str(emit_deploy) if emit_deploy is not None and best is not None else None), fmt)
    raise typer.Exit(EXIT_OK if best is not None else EXIT_REJECTED)

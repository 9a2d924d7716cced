from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli._common import FormatOpt, boundary
from kvplan.cli.gate import ConcOpt, CtxOpt
from kvplan.errors import EXIT_OK, EXIT_REJECTED
from kvplan.render import OutputFormat, emit


def _names(option: str, text: str) -> tuple[str, ...]:
    from kvplan.errors import InputError

    items = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not items:
        raise InputError(f"{option} is empty: give a comma-separated list")
    return items


def fit(
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
    exhaustive: Annotated[
        bool, typer.Option("--exhaustive", help="Plan every candidate up to --max-gpus (no skipping).")
    ] = False,
    emit_deploy: Annotated[
        Path | None, typer.Option("--emit-deploy", metavar="FILE", help="Write the best deployment as a YAML.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", metavar="FILE.png", help="GPUs vs concurrency (kvplan-dsa[plot]).")
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """The smallest deployment that meets the requirements: search GPUs, engines and layouts; exit 1 if none.

    Example: kvplan fit --model glm-5.3 --require-ctx 1M --require-concurrency 4@128K
    """
    with boundary():
        from kvplan import limits
        from kvplan.cli.gate import option_requirements
        from kvplan.errors import InputError
        from kvplan.fsio import check_target, write_atomic
        from kvplan.models.deploy import ENGINES
        from kvplan.models.load import find_gpu, load_model
        from kvplan.plan.fit import FitQuery
        from kvplan.plan.fit import fit as run_fit
        from kvplan.render.fit_report import deploy_yaml, fit_report, plot_fit

        req = option_requirements(require_ctx, require_concurrency)
        engines = _names("--engine", engine)
        for e in engines:
            if e not in ENGINES:
                raise InputError(f"--engine {e!r}: choose from {', '.join(ENGINES)}")
        if mtp not in ("off", "on", "both"):
            raise InputError(f"--mtp {mtp!r}: choose off, on or both")
        limits.bounded_int(max_gpus, name="--max-gpus", low=1, high=limits.MAX_FIT_GPUS)
        limits.bounded_int(gpus_per_node, name="--gpus-per-node", low=1, high=limits.MAX_GPUS)
        gpus = tuple(find_gpu(g) for g in _names("--gpu", gpu))
        reads = [Path(model)] if any(c in model for c in "/\\") else []
        for target, what in ((emit_deploy, "--emit-deploy"), (plot, "--plot")):
            if target is not None:
                check_target(target, what, reads)
        q = FitQuery(
            model_ref=str(Path(model).resolve()) if reads else model,
            gpus=gpus,
            engines=engines,
            requirements=req,
            max_gpus=max_gpus,
            gpus_per_node=gpus_per_node,
            mtp={"off": (False,), "on": (True,), "both": (False, True)}[mtp],
            exhaustive=exhaustive,
        )
        if pd:
            if emit_deploy is not None or plot is not None:
                raise InputError("--pd writes no --emit-deploy or --plot yet: run fit without --pd for those")
            from kvplan.plan.fit import fit_pd
            from kvplan.render.fit_report import pd_report
            from kvplan.units import parse_link

            parse_link(link)  # a malformed speed is bad input before the search
            split = fit_pd(load_model(model), q, link=link)
            emit(pd_report(split), fmt)
            raise typer.Exit(EXIT_OK if split.prefill.best and split.decode.best else EXIT_REJECTED)
        result = run_fit(load_model(model), q)
        best = result.best
        if emit_deploy is not None and best is not None:
            write_atomic(emit_deploy, deploy_yaml(best), "--emit-deploy", reads)
        if plot is not None:
            plot_fit(result, plot, reads)
        emit(fit_report(result, str(emit_deploy) if emit_deploy is not None and best is not None else None), fmt)
    raise typer.Exit(EXIT_OK if best is not None else EXIT_REJECTED)

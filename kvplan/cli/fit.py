from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli._common import EmitCommandOpt, FormatOpt, boundary
from kvplan.cli.gate import ConcOpt, CtxOpt
from kvplan.render import OutputFormat

FitModelOpt = Annotated[
    str, typer.Option("--model", "-m", metavar="NAME|PATH", help="Model preset name, model YAML or config.json.")
]
GpuOpt = Annotated[str, typer.Option("--gpu", help="GPU types to search (catalog names, comma-separated).")]
EngineOpt = Annotated[str, typer.Option("--engine", help="Engines to search: sglang, vllm.")]
MaxGpusOpt = Annotated[int, typer.Option("--max-gpus", help="Largest GPU count searched.")]
GpusPerNodeOpt = Annotated[int, typer.Option("--gpus-per-node", help="GPUs in one node.")]
MtpOpt = Annotated[str, typer.Option("--mtp", help="MTP candidates (models with MTP layers): off, on or both.")]
PdOpt = Annotated[bool, typer.Option("--pd", help="Size a prefill and a decode instance separately (disaggregation).")]
LinkOpt = Annotated[str, typer.Option("--link", help="PD hand-off link speed per rank, e.g. 400Gbps.")]
PdBackendOpt = Annotated[
    str | None,
    typer.Option(
        "--pd-backend",
        help="PD transport: mooncake or nixl (SGLang --disaggregation-transfer-backend; vLLM MooncakeConnector / "
        "NixlConnector) [default: SGLang mooncake, vLLM NixlConnector].",
    ),
]
PdStagingOpt = Annotated[
    bool, typer.Option("--pd-staging", help="SGLang's SGLANG_DISAGG_STAGING_BUFFER=1 (heterogeneous TP; not for MLA).")
]
ExhaustiveOpt = Annotated[
    bool, typer.Option("--exhaustive", help="Plan every candidate up to --max-gpus (no skipping).")
]
TraceOpt = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        metavar="FILE",
        help="A request trace (simulate's formats) each candidate's pools must hold, replayed per DP rank.",
    ),
]
TraceFormatOpt = Annotated[
    str | None, typer.Option("--trace-format", help="mooncake, kvtester, azure or kvplan [default: detected].")
]
MinHitOpt = Annotated[
    float | None, typer.Option("--min-hit", help="With --trace: the least prefix hit rate, 0..1 (e.g. 0.4).")
]
PrefillTpsOpt = Annotated[
    int, typer.Option("--prefill-tps", help="With --trace: prefill tokens/s of one request (uncached tokens).")
]
TpotOpt = Annotated[float, typer.Option("--tpot-ms", help="With --trace: decode time per output token, ms.")]
EmitDeployOpt = Annotated[
    Path | None, typer.Option("--emit-deploy", metavar="FILE", help="Write the best deployment as a YAML.")
]
RequireTtftOpt = Annotated[
    str | None,
    typer.Option("--require-ttft", metavar="DURATION", help="Time to first token at most this, e.g. 2s (kvplan perf)."),
]
RequireTpotOpt = Annotated[
    str | None,
    typer.Option("--require-tpot", metavar="DURATION", help="Time per output token at most this, e.g. 50ms."),
]
RequireTputOpt = Annotated[
    str | None,
    typer.Option(
        "--require-throughput", metavar="RATE", help="The deployment's output tokens a second, e.g. 20000tok/s."
    ),
]
AtOpt = Annotated[str, typer.Option("--at", help="The statistic the latency requirements hold at: median or p90.")]
AcceptOpt = Annotated[
    float | None,
    typer.Option("--acceptance-length", metavar="A", help="MTP candidates: tokens a verify step yields (SLA pricing)."),
]
RangeRatioOpt = Annotated[
    float,
    typer.Option("--range-ratio", metavar="R", help="SLA load: lengths uniform in [R × L, L], as bench_serving's."),
]
SlaIslOpt = Annotated[str | None, typer.Option("--isl", metavar="TOKENS", help="SLA load: input tokens a request.")]
SlaOslOpt = Annotated[str | None, typer.Option("--osl", metavar="TOKENS", help="SLA load: output tokens a request.")]
SlaConcOpt = Annotated[
    int | None,
    typer.Option(
        "--concurrency", help="SLA load: closed-loop clients [default: N of the first --require-concurrency]."
    ),
]
PlotOpt = Annotated[
    Path | None, typer.Option("--plot", metavar="FILE.png", help="GPUs vs concurrency (kvplan-llm[plot]).")
]


def fit(
    ctx: typer.Context,
    model: FitModelOpt,
    require_ctx: CtxOpt = None,
    require_concurrency: ConcOpt = None,
    gpu: GpuOpt = "h200,b200",
    engine: EngineOpt = "sglang,vllm",
    max_gpus: MaxGpusOpt = 32,
    gpus_per_node: GpusPerNodeOpt = 8,
    mtp: MtpOpt = "both",
    pd: PdOpt = False,
    link: LinkOpt = "400Gbps",
    pd_backend: PdBackendOpt = None,
    pd_staging: PdStagingOpt = False,
    exhaustive: ExhaustiveOpt = False,
    trace: TraceOpt = None,
    trace_format: TraceFormatOpt = None,
    min_hit: MinHitOpt = None,
    prefill_tps: PrefillTpsOpt = 10_000,
    tpot_ms: TpotOpt = 40.0,
    require_ttft: RequireTtftOpt = None,
    require_tpot: RequireTpotOpt = None,
    require_throughput: RequireTputOpt = None,
    at: AtOpt = "median",
    isl: SlaIslOpt = None,
    osl: SlaOslOpt = None,
    concurrency: SlaConcOpt = None,
    acceptance_length: AcceptOpt = None,
    range_ratio: RangeRatioOpt = 1.0,
    emit_deploy: EmitDeployOpt = None,
    plot: PlotOpt = None,
    emit_command: EmitCommandOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """The smallest deployment that meets the requirements: search GPUs, engines and layouts; exit 1 if none.

    Examples: kvplan fit --model glm-5.3 --require-ctx 1M --require-concurrency 4@128K;
    kvplan fit --model glm-5.3 --trace conversation_trace.jsonl --min-hit 0.4;
    kvplan fit --model deepseek-v3 --require-ttft 2s --require-tpot 50ms --isl 1K --osl 1K --concurrency 64
    """
    with boundary():
        from kvplan.cli._fit import FitOptions, run
        from kvplan.cli._once import needs

        needs(ctx, "--link", "link", "--pd", pd)  # the PD hand-off speed: nothing else reads it
        for option in ("--trace-format", "--prefill-tps", "--tpot-ms"):  # they describe the trace replay
            needs(ctx, option, option[2:].replace("-", "_"), "--trace", trace is not None)
        sla = require_ttft or require_tpot or require_throughput
        for option in ("--at", "--isl", "--osl", "--concurrency", "--acceptance-length", "--range-ratio"):
            name = option[2:].replace("-", "_")
            needs(ctx, option, name, "--require-ttft, --require-tpot or --require-throughput", sla)
        opts = FitOptions(model, require_ctx, require_concurrency, gpu, engine, max_gpus, gpus_per_node, mtp, pd,
                          link, pd_backend, pd_staging, exhaustive, trace, trace_format, min_hit, prefill_tps, tpot_ms,
                          emit_deploy, plot, emit_command, require_ttft=require_ttft, require_tpot=require_tpot,
                          require_throughput=require_throughput, at=at, isl=isl, osl=osl,
                          concurrency=concurrency, acceptance_length=acceptance_length,
                          range_ratio=range_ratio)  # fmt: skip
        code = run(opts, fmt)
    raise typer.Exit(code)

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary
from kvplan.render import OutputFormat, emit

LogOpt = Annotated[Path, typer.Option("--log", "-l", help="An SGLang or vLLM server log (startup lines).")]
CtxOpt = Annotated[
    str | None,
    typer.Option("--ctx", help="Check admission of a request this long with the log's pool: 1M, 128K, or a count."),
]
HitOpt = Annotated[
    str | None,
    typer.Option("--hit", help="A cached prefix (tokens): what it cannot save of the attention (DSA: indexer) work."),
]
EmitDeployOpt = Annotated[
    Path | None,
    typer.Option(
        "--emit-deploy",
        metavar="FILE",
        help="Write the deployment the log implies (YAML) for 'kvplan admit --deploy FILE'.",
    ),
]


def doctor(
    log: LogOpt,
    ctx: CtxOpt = None,
    hit: HitOpt = None,
    emit_deploy: EmitDeployOpt = None,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Is the pool in an engine log the pool the config implies? If not, which known cause explains the gap.

    Without --model, --deploy or --set the doctor compares the log with the default deployment when the log is
    from its model (or names none), and otherwise reads the log alone: its evidence, what it implies, and what to
    add. Exit 0 on a match or when it cannot tell, 1 with a finding (a cause, another model, a refused start), 2
    when the log holds no start-up line at all.

    Example: kvplan doctor --log server.log --set dcp=8 --ctx 1M
    """
    with boundary():
        from kvplan.cli._doctor import diagnosis_of, exit_code, write_deployment
        from kvplan.render.doctor_report import doctor_report

        result, reads = diagnosis_of(log, ctx, hit, emit_deploy, model, deploy, set_)
        emit(doctor_report(result), fmt)
        if emit_deploy is not None:
            write_deployment(result, emit_deploy, reads)
            typer.echo(f"kvplan: wrote the deployment the log implies to {emit_deploy}", err=True)
    raise typer.Exit(exit_code(result))

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary
from kvplan.errors import EXIT_OK, EXIT_REJECTED
from kvplan.render import OutputFormat, emit


def doctor(
    log: Annotated[Path, typer.Option("--log", "-l", help="An SGLang or vLLM server log (startup lines).")],
    ctx: Annotated[
        str | None,
        typer.Option("--ctx", help="Check admission of a request this long with the log's pool: 1M, 128K, or a count."),
    ] = None,
    hit: Annotated[
        str | None, typer.Option("--hit", help="A cached prefix (tokens): what it cannot save of the indexer work.")
    ] = None,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Is the pool in an engine log the pool the config implies? If not, which known cause explains the gap.

    Exit 0 when everything matches, 1 with findings, 2 when the log has nothing recognisable.

    Example: kvplan doctor --log server.log --set dcp=8 --ctx 1M
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.models.load import deployment_model_ref, load_deployment, load_model
        from kvplan.render.doctor_report import doctor_report
        from kvplan.runbook.doctor import diagnose
        from kvplan.runbook.parse import log_lines, parse_log
        from kvplan.units import parse_option_tokens as tokens

        length = tokens("--ctx", ctx) if ctx is not None else None
        cached = tokens("--hit", hit) if hit is not None else None
        if length is not None and length <= 0:
            raise InputError(f"--ctx must be positive, got {length}")
        parsed = parse_log(log_lines(log), str(log))
        dep = load_deployment(deploy, set_ or ())
        arch = load_model(model if model is not None else deployment_model_ref(dep))
        result = diagnose(arch, dep, parsed, ctx=length, hit=cached)
        emit(doctor_report(result), fmt)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_REJECTED)

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.errors import EXIT_OK, EXIT_REJECTED
from kvplan.render import OutputFormat, emit


def workspace(
    batch: Annotated[int, typer.Option("--batch", "-b", help="Running requests decoding together.")] = 1,
    mtp: Annotated[int | None, typer.Option("--mtp", help="MTP draft tokens [default: the deployment's].")] = None,
    ctx: Annotated[
        str | None,
        typer.Option(
            "--ctx", metavar="TOKENS", help="Context of each request [default: the longest the pool holds for --batch]."
        ),
    ] = None,
    chunk: Annotated[
        str | None, typer.Option("--chunk", help="Prefill chunk in query tokens [default: the engine's].")
    ] = None,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """What lives outside the pool (logits, top-k, request tables), whether it fits, and what breaks first.

    Exit 0 if the workspaces fit in the memory outside the pool, 1 if not; whether the pool itself holds the
    batch is shown as context.

    Example: kvplan workspace --batch 64 --ctx 128K --mtp 3
    """
    with boundary():
        from kvplan.plan.workspace import WorkspaceQuery, walls
        from kvplan.plan.workspace import workspace as run_workspace
        from kvplan.render.workspace_report import workspace_report
        from kvplan.units import parse_option_tokens as tokens

        q = WorkspaceQuery(
            batch=batch,
            draft_tokens=mtp,
            ctx=tokens("--ctx", ctx) if ctx is not None else None,
            chunk=tokens("--chunk", chunk) if chunk is not None else None,
        )
        plan = load_plan(model, deploy, set_)
        w = run_workspace(plan, q)
        emit(workspace_report(w, walls(plan, q)), fmt)
    raise typer.Exit(EXIT_OK if w.fits else EXIT_REJECTED)

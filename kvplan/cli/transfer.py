from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.render import OutputFormat, emit


def transfer(
    ctx: Annotated[str, typer.Option("--ctx", metavar="TOKENS", help="Tokens to move: 1M, 128K or an exact count.")],
    link: Annotated[str, typer.Option("--link", help="Link speed per rank: 400Gbps, 50GB/s, 46.5GiB/s.")] = "400Gbps",
    unit: Annotated[
        str,
        typer.Option("--unit", help="page (PD hand-off), chunk:N (offloading connector, full chunks), token."),
    ] = "page",
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Bytes moved for a prefill->decode hand-off or an offload of --ctx tokens, per rank and in total.

    Example: kvplan transfer --ctx 138615 --unit chunk:256 -d glm-5.3-8xh200-vllm
    """
    with boundary():
        from kvplan.plan.transfer import transfer as run_transfer
        from kvplan.render.transfer_report import transfer_report
        from kvplan.units import parse_option_tokens as tokens

        emit(
            transfer_report(run_transfer(load_plan(model, deploy, set_), tokens("--ctx", ctx), unit=unit, link=link)),
            fmt,
        )

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.render import OutputFormat, emit


def budget(
    ctx: Annotated[
        str,
        typer.Option(
            "--ctx",
            metavar="TOKENS",
            help="Context lengths separated by ',', ';' or spaces; digits grouped in threes (1,000,000) are one number",
        ),
    ] = "8K,128K,512K,1M",
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Bytes per token, per page and per context length: main KV, the DSA indexer K where the model has one, total.

    A hybrid model (sliding window, linear-attention state) is told per kind and per pool: what a request of each
    context takes from each pool the engine sizes.

    Example: kvplan budget --ctx 8K,1M --set kv_cache_dtype=bf16
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.plan.budget import budget as run_budget
        from kvplan.render.budget_report import budget_report
        from kvplan.units import parse_token_list

        try:
            contexts = parse_token_list(ctx)
        except InputError as e:
            raise InputError(f"--ctx: {e}") from None
        emit(budget_report(run_budget(load_plan(model, deploy, set_), contexts)), fmt)

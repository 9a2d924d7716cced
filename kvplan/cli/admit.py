from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli._common import (
    DeployOpt,
    EmitCommandOpt,
    FormatOpt,
    ModelOpt,
    SetOpt,
    boundary,
    emit_sets,
    load_plan,
    model_ref_of,
    print_launch,
)
from kvplan.errors import EXIT_OK, EXIT_REJECTED
from kvplan.render import OutputFormat, emit


def admit(
    ctx: Annotated[
        str, typer.Option("--ctx", metavar="TOKENS", help="Request context length: 1M, 128K or an exact count.")
    ],
    gen: Annotated[
        str,
        typer.Option(
            "--gen",
            help="Tokens asked for on top of a --ctx prompt, checked by the engine's own length rule "
            "(SGLang: prompt + gen <= context_len - 2, prompt <= context_len - 7).",
        ),
    ] = "0",
    concurrent: Annotated[int, typer.Option("--concurrent", "-n", help="Copies of the request at once.")] = 1,
    pool_tokens: Annotated[
        str | None,
        typer.Option("--pool-tokens", help="Use the pool an engine log reported instead of planning it."),
    ] = None,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    emit_command: EmitCommandOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Is a request of --ctx (+ --gen) tokens admitted? Exit 0 if so, 1 if rejected.

    Example: kvplan admit --ctx 1M --set dcp=8
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.plan.admit import Request, with_pool_tokens
        from kvplan.plan.admit import admit as run_admit
        from kvplan.render.admit_report import admit_report
        from kvplan.units import parse_option_tokens as tokens

        req = Request(ctx_tokens=tokens("--ctx", ctx), gen_tokens=tokens("--gen", gen), concurrent=concurrent)
        plan = load_plan(model, deploy, emit_sets(emit_command, set_))
        source = "planned"
        if pool_tokens is not None:
            if emit_command is not None:
                raise InputError("--pool-tokens changes the verdict, not the launch command: drop one of them")
            n = tokens("--pool-tokens", pool_tokens)
            if n <= 0:
                raise InputError(f"--pool-tokens must be positive, got {n}")
            plan = with_pool_tokens(plan, n)
            source = f"--pool-tokens {n:,} (from an engine log)"
        result = run_admit(plan, req, pool_source=source)
        if emit_command is not None:
            print_launch(plan, model_ref_of(model, plan), "admit", fmt)
        else:
            emit(admit_report(result), fmt)
    raise typer.Exit(EXIT_OK if result.admitted else EXIT_REJECTED)

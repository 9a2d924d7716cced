from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.render import OutputFormat, emit


def prefix(
    ctx: Annotated[str, typer.Option("--ctx", metavar="TOKENS", help="Request length L: 1M, 128K or an exact count.")],
    hit: Annotated[str, typer.Option("--hit", help="Cached prefix P (tokens).")] = "0",
    chunk: Annotated[str | None, typer.Option("--chunk", help="Prefill chunk [default: the engine's].")] = None,
    eagle: Annotated[bool, typer.Option("--eagle/--no-eagle", help="EAGLE/MTP on (bigram keys, drop rules).")] = False,
    lookahead: Annotated[
        bool, typer.Option("--lookahead/--no-lookahead", help="vLLM lookahead block hashes (off: EAGLE drops a block).")
    ] = True,
    sweep: Annotated[int | None, typer.Option("--sweep", help="Also print the curve at this many hit lengths.")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Draw the sweep to a PNG (kvplan-llm[plot]).")] = None,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """What a prefix hit really saves: pages, bytes, and the attention (DSA: indexer) work it cannot remove.

    Example: kvplan prefix --ctx 1M --hit 100000 --sweep 10
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.fsio import check_outputs
        from kvplan.plan.prefix import prefix_hit, sweep_points
        from kvplan.render.prefix_report import prefix_report
        from kvplan.units import parse_option_tokens as tokens

        reads = check_outputs([("--plot", plot)], [model, deploy])
        plan = load_plan(model, deploy, set_)
        length = tokens("--ctx", ctx)
        size = tokens("--chunk", chunk) if chunk is not None else None
        options = {"chunk": size, "eagle": eagle, "lookahead": lookahead}
        h = prefix_hit(plan, length, tokens("--hit", hit), **options)  # type: ignore[arg-type]
        if plot is not None and sweep is None:
            raise InputError("--plot needs --sweep N")
        curve = (  # --sweep 0 is refused as --sweep -3 is (sweep_points), not read as "no sweep"
            tuple(prefix_hit(plan, length, x, **options) for x in sweep_points(length, sweep))  # type: ignore[arg-type]
            if sweep is not None
            else ()
        )
        if plot is not None:
            from kvplan.render.plot import plot_prefix_sweep

            plot_prefix_sweep(curve, plot, reads=reads)
        emit(prefix_report(h, curve), fmt)

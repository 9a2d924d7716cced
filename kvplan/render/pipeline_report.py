"""Pipeline stages: what each stage holds, its own pool, and the one that binds (rows and JSON from one place)."""

from __future__ import annotations

from typing import Any

from kvplan.engines.common import PoolPlan
from kvplan.render import Section, count, nbytes, size


def stages_section(p: PoolPlan) -> Section | None:
    """One row a stage; None at pp 1. Every stage's pool is cut to the binding stage's (the engines' minimum)."""
    if not p.stages:
        return None
    rows = tuple(
        (
            str(s.stage.rank) + (" (binds)" if s.binding else ""),
            s.stage.held,
            size(s.weights_bytes),
            nbytes(s.cell_bytes),
            size(s.available_bytes),
            s.startup_error or count(s.logged_tokens),
        )
        for s in p.stages
    )
    return Section(
        f"Pipeline stages (pp {len(p.stages)}): each GPU of a stage",
        rows,
        ("stage", "holds", "weights", "cell", "KV budget", "own pool tokens"),
        note="every stage's pool is cut to the binding stage's; the per-GPU figures above are that stage's",
    )


def stages_data(p: PoolPlan) -> list[dict[str, Any]]:
    return [
        {
            "rank": s.stage.rank,
            "start_layer": s.stage.start,
            "end_layer": s.stage.end,
            "layers": s.stage.layers,
            "embedding": s.stage.first,
            "lm_head": s.stage.last,
            "weights_bytes": s.weights_bytes,
            "cell_bytes": s.cell_bytes,
            "available_bytes": s.available_bytes,
            "rows_per_gpu": s.rows,
            "logged_tokens": s.logged_tokens,
            "startup_error": s.startup_error,
            "binding": s.binding,
        }
        for s in p.stages
    ]

"""`kvplan budget`'s report: bytes per token and per request, by cache kind and pool."""

from __future__ import annotations

from dataclasses import asdict

from kvplan.engines.common import PoolPlan
from kvplan.plan.budget import Budget, KindCost, PoolNeed
from kvplan.render import Report, Section, count, first_screen, nbytes, ppm, size
from kvplan.render.applies import for_model, without_indexer_column
from kvplan.render.pipeline_report import stages_section
from kvplan.render.plan_sections import cell_section, demands_text, fp_data, plan_data, pool_need_data, title


def _kind_row(k: KindCost) -> tuple[str, str, str, str, str]:
    if k.per == "request":
        return (k.kind, count(k.layers), "0 B", nbytes(k.request_max_bytes), "a fixed state per request")
    if k.per == "window":
        return (
            k.kind,
            count(k.layers),
            nbytes(k.bytes_per_token),
            size(k.request_max_bytes),
            f"at most the window: {k.window:,} tokens × {k.bytes_per_token:,} B",
        )
    return (k.kind, count(k.layers), nbytes(k.bytes_per_token), "grows", "per token of context")


def kinds_section(kinds: tuple[KindCost, ...]) -> Section:
    """A hybrid's cache kinds on one GPU: per token, and the most one request holds (window / state)."""
    return Section(
        "Cache kinds on one GPU (model-level, before pages)",
        tuple(_kind_row(k) for k in kinds),
        ("kind", "layers", "per token", "per request at most", "why"),
    )


def pools_section(p: PoolPlan) -> Section:
    rows = tuple(
        (pool.name, pool.unit, nbytes(pool.unit_bytes), count(pool.capacity), size(pool.bytes)) for pool in p.pools
    )
    return Section("Pools on one GPU", rows, ("pool", "unit", "unit bytes", "capacity", "pool bytes"))


def pool_need_rows(label: str, needs: tuple[PoolNeed, ...]) -> list[tuple[str, str, str, str, str]]:
    """One row per pool (units, bytes, per kind) and a total: what one request takes, Pool.need × unit bytes."""
    rows = [(label, n.pool.name, f"{n.units:,} {n.pool.unit}s", size(n.bytes), demands_text(n)) for n in needs]
    rows.append((label, "total", "", size(sum(n.bytes for n in needs)), "over every pool"))
    return rows


def _hybrid_budget_report(b: Budget) -> Report:
    p = b.plan
    rows: list[tuple[str, str, str, str, str]] = []
    for f, needs in zip(b.per_context, b.pools_per_context, strict=True):
        rows += pool_need_rows(f"{f.tokens:,} tokens", needs)
    data = {
        "kinds": [asdict(k) for k in b.kinds],
        "pools": [
            {"name": q.name, "unit": q.unit, "unit_bytes": q.unit_bytes, "capacity": q.capacity, "bytes": q.bytes}
            for q in p.pools
        ],
        "per_context": [
            {"tokens": f.tokens, "pools": pool_need_data(needs), "total_bytes": sum(n.bytes for n in needs)}
            for f, needs in zip(b.per_context, b.pools_per_context, strict=True)
        ],
        "plan": plan_data(p),
    }
    return Report(
        "budget",
        title("budget", p, "per GPU"),
        (
            first_screen.engine_section(p),
            kinds_section(b.kinds),
            pools_section(p),
            Section(
                "What one request takes per GPU (page-rounded, as the engine allocates)",
                tuple(rows),
                ("context", "pool", "units", "bytes", "units by kind"),
            ),
        ),
        for_model(p.arch, data),
        notes=p.notes,
        startup_error=p.startup_error,
    )


def budget_report(b: Budget) -> Report:
    p = b.plan
    if p.pools:  # a hybrid: a request's cost is per kind and per pool, not one number
        return _hybrid_budget_report(b)
    rows = []
    for label, f in (
        ("per pool row" if p.dcp > 1 else "per token", b.per_row),
        (f"per page ({p.logical_page_tokens} tokens)", b.per_page),
    ):
        rows.append(
            (label, "", nbytes(f.main_bytes), nbytes(f.indexer_bytes), nbytes(f.draft_bytes), nbytes(f.total_bytes))
        )
    for f in b.per_context:
        rows.append(
            (
                f"{f.tokens:,} tokens",
                count(f.pages),
                size(f.main_bytes),
                size(f.indexer_bytes),
                size(f.draft_bytes),
                size(f.total_bytes),
            )
        )
    share = (
        *(
            (
                ("indexer / main KV", ppm(b.indexer_share_of_main_ppm)),
                ("indexer / total", ppm(b.indexer_share_of_total_ppm)),
            )
            if p.arch.has_indexer
            else ()
        ),
        ("tail-page waste per request", f"{nbytes(b.tail_waste_bytes)} ((page − 1) / 2 rows × cell)"),
    )
    data = {
        "per_row": fp_data(b.per_row),
        "per_page": fp_data(b.per_page),
        "per_context": [fp_data(f) for f in b.per_context],
        "indexer_share_of_main_ppm": b.indexer_share_of_main_ppm,
        "indexer_share_of_total_ppm": b.indexer_share_of_total_ppm,
        "tail_waste_bytes": b.tail_waste_bytes,
        "plan": plan_data(p),
    }
    return Report(
        "budget",
        title("budget", p, "per GPU"),
        (
            first_screen.engine_section(p),
            cell_section(p),
            without_indexer_column(
                p.arch, Section("Budget per GPU", tuple(rows), ("", "pages", "main KV", "indexer", "draft", "total"))
            ),
            Section("Shares", share, ("", "")),
            *filter(None, (stages_section(p),)),
        ),
        for_model(p.arch, data),
        startup_error=p.startup_error,
    )

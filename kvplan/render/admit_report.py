"""`kvplan admit`'s report: the verdict, the need against the pool, the remedies."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.models.weights_band import band_for
from kvplan.plan.admit import Admission, dp_ranks
from kvplan.plan.band_verdict import BandVerdict, judge
from kvplan.plan.budget import pool_needs
from kvplan.render import Report, Section, count, first_screen, gib, nbytes, pct, size
from kvplan.render.applies import for_model
from kvplan.render.band_text import banded_verdict
from kvplan.render.pipeline_report import stages_section
from kvplan.render.plan_sections import (
    cell_section,
    chain_section,
    demands_text,
    fp_data,
    knobs_section,
    memory_bar,
    plan_data,
    pool_need_data,
    remedy_detail,
    title,
    workspace_data,
    workspace_section,
)


def _need_have(need: int, have: int, unit: str) -> str:
    if unit == "bytes":
        return f"{gib(need)} / {gib(have)}"
    return f"{need:,} / {have:,} {unit}" if unit else "n/a"


def _times_requests(a: Admission) -> str:
    """'× 8 request(s)'; with DP attention, the share of one rank's pool: '× 4 request(s) on one DP rank (8
    over 2 DP-attention ranks)'."""
    r, dp = a.request, dp_ranks(a.plan)
    if dp > 1 and r.concurrent > 1:
        return f"× {a.per_rank} request(s) on one DP rank ({r.concurrent} over {dp} DP-attention ranks)"
    return f"× {r.concurrent} request(s)" if r.concurrent > 1 else ""


def _uniform_need_rows(a: Admission) -> tuple[tuple[str, str, str], ...]:
    p, r, need = a.plan, a.request, a.need
    return (
        ("tokens", count(r.total_tokens), f"ctx {r.ctx_tokens:,} + gen {r.gen_tokens:,}"),
        ("pages", count(need.pages), f"of {p.logical_page_tokens} tokens"),
        ("main KV per GPU", size(need.main_bytes), ""),
        *(
            (
                (
                    "indexer per GPU",
                    size(need.indexer_bytes),
                    pct(need.indexer_bytes, need.total_bytes) + " of the request",
                ),
            )
            if p.arch.has_indexer
            else ()
        ),
        *((("draft per GPU", size(need.draft_bytes), ""),) if need.draft_bytes else ()),
        ("total per GPU", size(need.total_bytes), _times_requests(a)),
        (
            "tail-page waste",
            size(a.tail_waste_bytes),
            f"{a.tail_waste_tokens} unfilled slot(s) in the last page" + (f" × {a.per_rank}" if a.per_rank > 1 else ""),
        ),
    )


def _hybrid_need_rows(a: Admission) -> tuple[tuple[str, str, str], ...]:
    """A hybrid's request: each pool's units (Pool.need) × its unit bytes, not the full layers' footprint."""
    r = a.request
    needs = pool_needs(a.plan, r.total_tokens)
    return (
        ("tokens", count(r.total_tokens), f"ctx {r.ctx_tokens:,} + gen {r.gen_tokens:,}"),
        *(
            (
                f"{n.pool.name} per GPU",
                f"{n.units:,} {n.pool.unit}s = {size(n.bytes)}",
                f"{demands_text(n)} (× {n.pool.unit_bytes:,} B a {n.pool.unit})",
            )
            for n in needs
        ),
        ("total per GPU", size(sum(n.bytes for n in needs)), _times_requests(a)),
    )


def admit_report(a: Admission) -> Report:
    p = a.plan
    # a pool read from a log (--pool-tokens, doctor) does not rest on the weights
    band = band_for(p.arch, p.knob("weights_per_gpu").origin) if a.pool_source == "planned" else None
    est = f" (weights estimated {band.percent})" if band else ""
    bv = judge(a)  # the verdict at the band's ends too
    req_rows = _hybrid_need_rows(a) if p.pools else _uniform_need_rows(a)
    checks = tuple((c.name, "ok" if c.ok else "FAIL", _need_have(c.need, c.have, c.unit), c.detail) for c in a.checks)
    sections = [
        *first_screen.admit_screen(a),  # the first screen: the binding check, the fix, the engine's own lines
        cell_section(p),
        chain_section(p),
        *filter(None, (stages_section(p),)),
        Section("What the request needs", req_rows, ("", "", "")),
        Section("Checks", checks, ("check", "result", "need / have", "detail")),
        Section("Fit", _fit_rows(a), ("", "", "")),
    ]
    if a.remedies:
        sections.append(
            Section(
                "Smallest changes that admit it (each re-planned)",
                tuple((m.flags, count(m.pool_tokens) + " tokens", remedy_detail(m)) for m in a.remedies),
                ("change", "pool after", "detail"),
            )
        )
    elif not a.admitted:
        sections.append(Section("Smallest changes that admit it", (("none found", "", ""),), ("", "", "")))
    sections.append(workspace_section(a.workspace))
    if p.arch.has_indexer:  # the main-only comparison exists only where an indexer is left out of it
        sections.append(_main_only_section(a))
    sections.append(knobs_section(p))
    return Report(
        "admit",
        title("admit", p),
        tuple(sections),
        for_model(p.arch, _admit_data(a, band.ppm if band else None, bv)),
        verdict=banded_verdict(first_screen.verdict(a, est), bv, a.usable_tokens),
        verdict_ok=a.admitted,
        bar=memory_bar(p),
        notes=p.notes,
        startup_error=p.startup_error,
    )


def _fit_rows(a: Admission) -> tuple[tuple[str, str, str], ...]:
    r = a.request
    return (
        ("pool (usable)", count(a.usable_tokens) + " tokens", a.pool_source),
        ("binding constraint", a.binding.name, ""),
        ("headroom", count(a.headroom_tokens) + " tokens", "after these requests"),
        ("largest admitted context", count(a.largest_ctx) + " tokens", "one request"),
        (
            "such requests at once",
            count(a.max_concurrent),
            "rejected: over the context length" if a.over_context else "",
        ),
        *(
            (("fewer at once", f"{a.fewer_at_once:,} of the {r.concurrent:,} fit", "a smaller -n, not a --set"),)
            if a.fewer_at_once is not None
            else ()
        ),
    )


def _main_only_section(a: Admission) -> Section:
    p, mo = a.plan, a.main_only
    main_only = (
        ("cell", nbytes(mo.cell_bytes), nbytes(p.cell.total_bytes)),
        ("pool tokens", count(mo.pool_tokens), count(p.logged_tokens)),
        ("largest context", count(mo.largest_ctx), count(a.largest_ctx)),
        ("verdict", "admitted" if mo.admitted else "rejected", "admitted" if a.admitted else "rejected"),
    )
    return Section(
        "A plan that counted main KV only would have claimed", main_only, ("figure", "main KV only", "with the indexer")
    )


def _admit_data(a: Admission, band_ppm: int | None, bv: BandVerdict) -> dict[str, Any]:
    p, r = a.plan, a.request
    return {
        "admitted": a.admitted,
        "binding": a.binding.name,
        "request": {"ctx_tokens": r.ctx_tokens, "gen_tokens": r.gen_tokens, "concurrent": r.concurrent},
        "need": fp_data(a.need),
        **({"need_by_pool": pool_need_data(pool_needs(p, r.total_tokens))} if p.pools else {}),
        "checks": [asdict(c) for c in a.checks],
        "usable_tokens": a.usable_tokens,
        "headroom_tokens": a.headroom_tokens,
        "largest_ctx": a.largest_ctx,
        "max_concurrent": a.max_concurrent,
        "fewer_at_once": a.fewer_at_once,
        "remedies": [
            {**asdict(m), "detail": remedy_detail(m), "sizes": dict(m.sizes), "set": list(m.sets)} for m in a.remedies
        ],
        "main_only": asdict(a.main_only) if p.arch.has_indexer else None,
        "pool_source": a.pool_source,
        "weights_band_ppm": band_ppm,
        "band_verdict": {"low": bv.low, "point": bv.point, "high": bv.high},
        "tail_waste_tokens": a.tail_waste_tokens,
        "tail_waste_bytes": a.tail_waste_bytes,
        "workspace": workspace_data(a.workspace),
        "plan": plan_data(p),
    }

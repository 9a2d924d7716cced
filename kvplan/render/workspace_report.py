"""`kvplan workspace`'s report: the engine's scratch memory beside the pool, its chunking and its walls."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.plan.band_verdict import WorkspaceBand, judge_workspace
from kvplan.plan.budget import pool_needs
from kvplan.plan.workspace import Wall, Workspace
from kvplan.render import Report, Section, count, first_screen, gib, size
from kvplan.render.applies import for_model
from kvplan.render.plan_sections import demands_text, plan_data, title, workspace_data, workspace_section


def _chunks_text(pre: Any) -> str:
    """'one chunk', '11 chunks of 3.18 GiB' or '2 chunks: 1 of 3.19 GiB, the last of 0.81 GiB'."""
    if pre.chunks == 1:
        return f"one chunk of {size(pre.chunk_bytes)}"
    if pre.last_chunk_rows == pre.rows_per_chunk:
        return f"{pre.chunks:,} chunks of {size(pre.chunk_bytes)}"
    full = pre.chunks - 1
    return (
        f"{pre.chunks:,} chunks: {full:,} of {size(pre.chunk_bytes)}, the last ({pre.last_chunk_rows:,} rows) "
        f"of {size(pre.last_chunk_bytes)}"
    )


def pool_context_section(w: Workspace, band: WorkspaceBand | None = None) -> Section:
    """Whether the pool holds the batch: context for the workspace verdict, not part of it; where it differs at
    an end of the pool's band, it says so."""
    p = w.plan
    need = w.batch * p.pages_for(w.ctx)
    pool_rows = (
        tuple(
            (
                f"{n.pool.name}: {n.pool.unit}s needed / capacity",
                f"{w.batch * n.units:,} / {n.pool.capacity:,}",
                f"{w.batch:,} × ({demands_text(n)})",
            )
            for n in pool_needs(p, w.ctx)
        )
        if p.pools
        else (("pages needed / usable", f"{need:,} / {p.usable_pages:,}", f"of {p.logical_page_tokens} tokens"),)
    )
    rows = (
        ("requests × context", f"{w.batch:,} × {w.ctx:,}", "the context defaults to the longest the pool holds"),
        *pool_rows,
        ("running requests", f"{w.batch:,} / {p.max_running_requests:,}", "batch / max_running_requests"),
        (
            "the pool holds them",
            (band and band.words(band.pool_fits, "yes", "no")) or ("yes" if w.pool_fits else "no"),
            "engine would not start" if p.startup_error else "not part of the verdict",
        ),
    )
    return Section("The pool (context, not the verdict)", rows, ("", "", ""))


def _chunking_sections(w: Workspace) -> tuple[Section, ...]:
    """The DSA indexer's prefill logits chunking; nothing for a model without an indexer."""
    pre = w.prefill
    if pre is None:
        return ()
    sglang = w.plan.engine == "sglang"
    chunking = (
        ("query rows × keys", f"{pre.rows:,} × {pre.cols:,}", ""),
        ("logits unchunked", size(pre.logits_bytes), "rows × keys × 4 B (fp32)"),
        (
            "budget",
            size(pre.budget_bytes),
            "min(0.2 × total × (1 − mfs), 0.3 × total)" if sglang else "VLLM_SPARSE_INDEXER_MAX_LOGITS_MB",
        ),
        ("budget checked", "yes" if pre.checked else "no", "rows × keys >= 8,000,000" if sglang else ""),
        ("rows per chunk", count(pre.rows_per_chunk), _chunks_text(pre)),
    )
    return (Section("Prefill logits chunking (one chunk of the longest request)", chunking, ("", "", "")),)


def workspace_report(w: Workspace, walls: tuple[Wall, ...]) -> Report:
    p = w.plan
    wall_rows = tuple(
        (
            wl.knob,
            count(wl.largest_fitting) if wl.largest_fitting >= 0 else "none (already over)",
            wl.breaks or f"nothing up to {wl.limit:,}",
        )
        for wl in walls
    )
    ok = w.fits  # the verdict is about the workspaces; the pool is context (its own section)
    band = judge_workspace(w)
    flip = band.words(band.fits, "FITS", "DOES NOT FIT") if band else ""
    verdict = (
        f"FITS: {gib(w.peak_bytes)} of workspaces in {gib(w.room_bytes)}, {gib(w.left_bytes)} left"
        if ok
        else f"DOES NOT FIT: {gib(w.peak_bytes)} of workspaces in {gib(w.room_bytes)}, "
        f"{gib(-w.left_bytes)} over, at batch {w.batch:,}, context {w.ctx:,}"
    )
    if flip:  # the room rests on an estimate: a verdict that flips inside the band says so
        verdict = flip + verdict.removeprefix("FITS").removeprefix("DOES NOT FIT")
    return Report(
        "workspace",
        title("workspace", p),
        (
            workspace_section(w),
            pool_context_section(w, band),
            first_screen.engine_section(p),
            *_chunking_sections(w),
            Section(
                "Growing one knob at a time: the largest value that fits, and what breaks next",
                wall_rows,
                ("knob", "largest that fits", "what breaks next"),
            ),
        ),
        for_model(
            p.arch,
            {"fits": ok, "workspace": workspace_data(w), "walls": [asdict(wl) for wl in walls], "plan": plan_data(p)},
        ),
        verdict=verdict,
        verdict_ok=ok,
        notes=p.notes,
        startup_error=p.startup_error,
    )

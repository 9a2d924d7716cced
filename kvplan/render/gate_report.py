"""Reports for `kvplan lock`, `kvplan gate` and `kvplan diff`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.engines.band import pool_band
from kvplan.models.weights_band import percent
from kvplan.plan.gate import Figures, GateResult, KnobEffect, is_new
from kvplan.render import Report, Section, count, first_screen, nbytes, size
from kvplan.render.band_text import gate_band

_ROWS: tuple[tuple[str, str], ...] = (
    ("pool_tokens", "pool tokens (logical)"),
    ("pool_rows_per_gpu", "pool rows per GPU"),
    ("largest_admitted_ctx", "largest admitted context"),
    ("cell_bytes", "bytes per row"),
    ("indexer_bytes_per_row", "indexer bytes per row"),
    ("available_bytes", "KV budget per GPU"),
    ("workspace_left_bytes", "workspace headroom"),
    ("max_running_requests", "max running requests"),
)


def _fmt(key: str, v: int) -> str:
    if key.endswith("_bytes") and key not in ("cell_bytes",):
        return size(v)
    if key in ("cell_bytes", "indexer_bytes_per_row"):
        return nbytes(v)
    return count(v)


def _pct(before: int, after: int) -> str:
    if before == after:
        return "no change"
    if not before or is_new(before, after):
        return "new"
    return f"{(after - before) * 100 / before:+.2f}%"


def _compare_rows(before: Figures | None, after: Figures) -> tuple[tuple[str, ...], ...]:
    rows = []
    for key, label in _ROWS:
        a = getattr(after, key)
        b = getattr(before, key) if before is not None else None
        rows.append((label, _fmt(key, b) if b is not None else "—", _fmt(key, a), _pct(b, a) if b is not None else ""))
    for ctx, n in after.concurrency.items():
        b = before.concurrency.get(ctx) if before is not None else None
        rows.append((f"requests of {int(ctx):,} at once", count(b) if b is not None else "—", count(n),
                     _pct(b, n) if b is not None else ""))  # fmt: skip
    return tuple(rows)


def gate_report(results: tuple[GateResult, ...]) -> Report:
    ok = all(r.ok for r in results)
    failed = [(r.config, rule) for r in results for rule in r.rules if not rule.ok]
    sections = [*first_screen.gate_screen(results)]  # in tokens, the fix, the engine's own lines
    if failed:
        sections.append(
            Section("Failed rules", tuple((c, f.name, f.detail) for c, f in failed), ("config", "rule", ""))
        )
    for r in results:
        sections.append(
            Section(
                f"{r.config}: {'pass' if r.ok else 'FAIL'}",
                tuple(("ok" if x.ok else "FAIL", x.name, x.detail) for x in r.rules),
                ("", "rule", ""),
            )
        )
        rows = _compare_rows(r.before, r.after)
        band = gate_band(r)
        if band:  # the points are compared; the band (the same before and after) stands beside the pool
            rows = ((*rows[0][:2], f"{rows[0][2]} {band}", *rows[0][3:]), *rows[1:])
        sections.append(Section(f"{r.config}: before / after", rows, ("", "lock", "now", "change")))
    estimated = [r.weights_band_ppm for r in results if r.weights_band_ppm is not None]
    tag = ""
    if len(results) == 1 and estimated:
        tag = f" (weights estimated {percent(estimated[0])})"
    elif estimated:  # the widest band among the configs whose weights are an estimate
        tag = f" (weights estimated in {len(estimated)} of {len(results)} configs, up to {percent(max(estimated))})"
    verdict = (
        f"GATE PASSED{tag}: {len(results)} config(s)"
        if ok
        else f"GATE FAILED{tag}: {len(failed)} rule(s) in {sum(not r.ok for r in results)} config(s)"
    )
    data: dict[str, Any] = {
        "passed": ok,
        "results": [
            {
                "config": r.config,
                "passed": r.ok,
                "rules": [asdict(x) for x in r.rules],
                "before": asdict(r.before) if r.before is not None else None,
                "after": asdict(r.after),
                "capacity_change_ppm": r.capacity_change_ppm,
                "weights_band_ppm": r.weights_band_ppm,
                "pool_band": pool_band(r.plan).data() if r.plan is not None else None,
                "engine_log": first_screen.engine_data(r.plan) if r.plan is not None else None,
            }
            for r in results
        ],
    }
    return Report("gate", "kvplan gate", tuple(sections), data, verdict=verdict, verdict_ok=ok)


def lock_report(entries: dict[str, Figures], path: str, updated: tuple[str, ...], pruned: tuple[str, ...]) -> Report:
    """The lock as written: every entry, which ones this run (re)computed, which ones --prune dropped."""
    rows = tuple(
        (
            name,
            "updated" if name in updated else "kept",
            f.engine,
            count(f.pool_tokens),
            count(f.largest_admitted_ctx),
            nbytes(f.cell_bytes),
            f"{f.logical_page_tokens:,} ({f.rank_page_tokens:,} per rank)",
        )
        for name, f in sorted(entries.items())
    )
    sections = [
        Section(
            "",
            rows,
            ("config", "entry", "engine", "pool tokens", "largest context", "bytes per row", "page tokens"),
        )
    ]
    if pruned:
        sections.append(Section("Dropped (--prune)", tuple((n,) for n in pruned), ("config",)))
    return Report(
        "lock",
        f"kvplan lock: wrote {path}"
        f" ({len(updated)} updated, {len(entries) - len(updated)} kept, {len(pruned)} dropped)",
        tuple(sections),
        {
            "path": path,
            "updated": list(updated),
            "pruned": list(pruned),
            "configs": {n: asdict(f) for n, f in sorted(entries.items())},
        },
    )


_KIND = {"model": "model change", "engine": "engine change", "knob": ""}


def _pool_cell(tokens: int, error: str | None) -> str:
    if error is None:
        return count(tokens)
    return f"{count(tokens)} (does not start)" if tokens else "does not start"


def diff_report(
    old: str,
    new: str,
    effects: tuple[KnobEffect, ...],
    base_tokens: int,
    new_tokens: int,
    *,
    startup_error: str | None = None,
) -> Report:
    """startup_error: why the engine would refuse NEW (or OLD), if it would."""
    rows = [
        (
            e.knob + (f" ({_KIND[e.kind]})" if _KIND.get(e.kind) else ""),
            e.old,
            e.new,
            _pool_cell(e.pool_tokens, e.startup_error),
            _pct(e.base_pool_tokens, e.pool_tokens) if e.pool_tokens or not e.startup_error else "",
        )
        for e in effects
    ]
    rows.append(("all together", old, new, _pool_cell(new_tokens, startup_error), _pct(base_tokens, new_tokens)))
    after_engine = any(e.kind == "engine" for e in effects)
    title = "Each change on its own, applied to OLD" + (
        " (knobs: to OLD's settings on NEW's engine)" if after_engine else ""
    )
    return Report(
        "diff",
        f"kvplan diff: {old} -> {new} (pool {base_tokens:,} -> {new_tokens:,} tokens)",
        (Section(title, tuple(rows), ("change", "old", "new", "pool tokens", "change")),),
        {
            "old": old,
            "new": new,
            "old_pool_tokens": base_tokens,
            "new_pool_tokens": new_tokens,
            "startup_error": startup_error,
            "effects": [asdict(e) for e in effects],
        },
    )


def _escape_data(text: str) -> str:
    """GitHub workflow-command escaping of a message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """GitHub workflow-command escaping of a property value (file=, title=)."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(results: tuple[GateResult, ...]) -> list[str]:
    """One `::error` line per violated rule, for GitHub Actions (the caller writes them to stderr)."""
    return [
        f"::error file={_escape_property(r.config)},title=kvplan gate::{_escape_data(f'{rule.name}: {rule.detail}')}\n"
        for r in results
        for rule in r.rules
        if not rule.ok
    ]

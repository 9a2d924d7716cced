"""The report of `kvplan diff --engine-version OLD NEW CONFIG...`: one row per config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.engines.common import PoolPlan
from kvplan.plan.admit import largest_admitted
from kvplan.render import Report, Section, count


@dataclass(frozen=True)
class VersionRow:
    """One config planned under two engine versions; a plan is None where that version's engine refuses it."""

    config: str
    old_version: str
    new_version: str
    old: PoolPlan | None
    new: PoolPlan | None
    old_error: str | None = None
    new_error: str | None = None


def _largest(p: PoolPlan | None) -> int:
    return largest_admitted(p) if p is not None else 0


def _refusal(p: PoolPlan | None, error: str | None) -> str | None:
    return error if p is None else p.startup_error


def _pool(p: PoolPlan | None, error: str | None) -> str:
    if _refusal(p, error) is not None:
        return "does not start"
    assert p is not None
    return count(p.logged_tokens)


def _change(a: int, b: int) -> str:
    if a == b:
        return "no change"
    return f"{(b - a) * 100 / a:+.2f}%" if a else "new"


def version_diff_report(rows: tuple[VersionRow, ...]) -> Report:
    table = []
    for r in rows:
        a, b = r.old, r.new
        ok = _refusal(a, r.old_error) is None and _refusal(b, r.new_error) is None
        change = _change(a.logged_tokens, b.logged_tokens) if ok and a is not None and b is not None else "—"
        table.append(
            (
                r.config,
                f"{r.old_version} -> {r.new_version}",
                f"{_pool(a, r.old_error)} -> {_pool(b, r.new_error)}",
                change,
                f"{count(_largest(a))} -> {count(_largest(b))}",
                f"{count(a.max_running_requests) if a else '—'} -> {count(b.max_running_requests) if b else '—'}",
            )
        )
    refusals = tuple(
        (r.config, v, why)
        for r in rows
        for v, p, e in ((r.old_version, r.old, r.old_error), (r.new_version, r.new, r.new_error))
        if (why := _refusal(p, e)) is not None
    )
    sections = [
        Section(
            "Each config under the old and the new engine version's rules",
            tuple(table),
            (
                "config",
                "version",
                "pool tokens",
                "change",
                "largest ctx",
                "max running",
            ),
        )
    ]
    if refusals:
        sections.append(Section("The engine refuses", refusals, ("config", "version", "why")))
    data: dict[str, Any] = {
        "configs": [
            {
                "config": r.config,
                "old_version": r.old_version,
                "new_version": r.new_version,
                "old": _figures(r.old, r.old_error),
                "new": _figures(r.new, r.new_error),
            }
            for r in rows
        ]
    }
    changed = sum(1 for t in table if t[3] != "no change")
    return Report(
        "diff",
        f"kvplan diff --engine-version: {len(rows)} config(s)",
        tuple(sections),
        data,
        verdict=f"{changed} of {len(rows)} config(s) change capacity or start differently",
    )


def _figures(p: PoolPlan | None, error: str | None) -> dict[str, Any]:
    if p is None:
        return {"starts": False, "startup_error": error}
    return {
        "starts": p.startup_error is None,
        "startup_error": p.startup_error,
        "engine_version": p.engine_version,
        "pool_tokens": p.logged_tokens,
        "largest_admitted_ctx": _largest(p),
        "cell_bytes": p.cell.total_bytes,
        "kv_format": p.kv_format,
        "max_running_requests": p.max_running_requests,
    }

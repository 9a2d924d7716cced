"""The doctor's JSON: the diagnosis, its figures and start-up error as raw integers."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from kvplan.plan.prefix import PrefixHit
from kvplan.render.applies import for_model
from kvplan.render.doctor_chain import chain_data
from kvplan.render.plan_sections import plan_data, remedy_detail
from kvplan.runbook.doctor import Comparison, Diagnosis, Revealed
from kvplan.runbook.evidence import Evidence
from kvplan.runbook.parse import At, Gib, Run


def report_data(d: Diagnosis, findings: list[str]) -> dict[str, Any]:
    h = d.headline
    return {
        "status": d.status,
        "headline": {
            "kind": h.kind,
            "cause": h.cause.key if h.cause is not None else None,
            "cause_name": h.cause.name if h.cause is not None else None,
            "missing": list(h.missing),
        },
        "evidence": _evidence_data(d.evidence),
        "byte_fact": None if d.byte_fact is None else {**asdict(d.byte_fact), "agrees": d.byte_fact.agrees},
        "problems": list(d.problems),
        "notes": list(d.notes),
        "findings": findings,
        "log": _log_data(d),
        "model": asdict(d.model),
        "figures": _figure_data(d.run),
        "revealed": [_revealed_data(r) for r in d.revealed],
        "memory": [
            {
                "name": t.name,
                "config_bytes": t.config_bytes,
                "log_bytes": t.log.bytes if t.log else None,
                "low_bytes": t.low_bytes,
                "high_bytes": t.high_bytes,
                "line": t.line,
                "matches": t.matches,
            }
            for t in d.memory
        ],
        "memory_chain": chain_data(d.chain),
        "pool": _pool_data(d.comparison),
        "causes": [{f.name: getattr(cause, f.name) for f in fields(cause) if f.name != "plan"} for cause in d.causes],
        "per_rank": asdict(d.per_rank) if d.per_rank else None,
        "kv_size": (
            {
                "logged_bytes": d.kv_size.logged.bytes,
                "rows": d.kv_size.rows,
                "expected_bytes": d.kv_size.expected_bytes,
                "budget_bytes": d.kv_size.budget_bytes,
                "matches": d.kv_size.matches,
            }
            if d.kv_size
            else None
        ),
        "startup": _startup_data(d),
        "implied": asdict(d.implied) if d.implied else None,
        "admission": _admission_data(d),
        "prefix": _prefix_data(d.prefix),
        "decode": asdict(d.decode) if d.decode else None,
        "plan": for_model(d.best.arch, plan_data(d.best)) if d.best else None,
    }


def _evidence_data(e: Evidence | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "facts": [{f.name: getattr(x, f.name) for f in fields(x)} for x in e.facts],
        "bytes_per_row": None
        if e.per_row_low is None
        else {"low": e.per_row_low, "high": e.per_row_high, "unit": e.per_row_unit, "how": e.per_row_how},
        "candidates": [{f.name: getattr(x, f.name) for f in fields(x)} for x in e.candidates],
        "refused": e.refused,
        "hybrid": e.hybrid,
    }


def _log_data(d: Diagnosis) -> dict[str, Any]:
    runs = [
        {"index": r.index, "first_line": r.first_line, "last_line": r.last_line, "engine": r.engine,
         "complete": r.complete}
        for r in d.log.runs
    ]  # fmt: skip
    return {"source": d.log.source, "lines": d.log.lines, "runs": runs, "used_run": d.run.index}


def _revealed_data(r: Revealed) -> dict[str, Any]:
    return {
        "knob": r.knob,
        "log_value": r.value,
        "config_value": r.config_value if isinstance(r.config_value, int | float | str | bool) else str(r.config_value),
        "differs": r.differs,
        "changes_pool": r.changes_pool,
        "config_pool": r.config_pool,
        "pool_after": r.pool_after,
        "cell_before": r.cell_before,
        "cell_after": r.cell_after,
        "source": r.source,
        "line": r.line,
    }


def _pool_data(c: Comparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "logged": c.logged.value,
        "unit": c.logged.unit,
        "source": c.logged.source,
        "line": c.logged.line,
        "config": c.config,
        "revealed": c.revealed,
        "expected": c.expected,
        "low": c.low,
        "high": c.high,
        "within": c.within,
        "memory_from_log": c.memory_from_log,
        "available_low_bytes": c.available_low,
        "available_high_bytes": c.available_high,
        "band": None if c.band is None else dict(zip(("low", "high", "why"), c.band, strict=True)),
    }


def _admission_data(d: Diagnosis) -> dict[str, Any] | None:
    a = d.admission
    if not a:
        return None
    return {
        "ctx_tokens": a.request.total_tokens,
        "asked": d.admission_asked,
        "admitted": a.admitted,
        "binding": a.binding.name,
        "largest_ctx": a.largest_ctx,
        "usable_tokens": a.usable_tokens,
        "pool_source": a.pool_source,
        "remedies": [{**asdict(r), "detail": remedy_detail(r), "sizes": dict(r.sizes)} for r in a.remedies],
    }


def _prefix_data(p: PrefixHit | None) -> dict[str, Any] | None:
    if not p:
        return None
    return {
        "ctx_tokens": p.ctx_tokens,
        "hit_tokens": p.hit_tokens,
        "reusable_tokens": p.reusable_tokens,
        "pairs_total": p.pairs_total,
        "pairs_saved": p.pairs_saved,
        "pairs_paid": p.pairs_paid,
        "saved_ppm": p.saved_ppm,
        "naive_ppm": p.naive_ppm,
    }


def _scalar(v: object) -> object:
    return v if isinstance(v, int | float | str | bool) or v is None else str(v)


def _startup_data(d: Diagnosis) -> dict[str, Any] | None:
    s = d.startup
    if s is None:
        return None
    return {
        "message": s.message,
        "line": s.line,
        "max_model_len": s.max_model_len,
        "needed_bytes": s.needed.bytes if s.needed else None,
        "available_bytes": s.available.bytes if s.available else None,
        "estimated_max_len": s.estimated_max_len,
        "predicted": s.predicted,
        "planned_needed_bytes": s.planned_needed_bytes,
        "planned_estimate_low": s.planned_estimate_low,
        "planned_estimate_high": s.planned_estimate_high,
    }


def _figure_data(run: Run) -> dict[str, Any]:
    def gibs(items: tuple[At[Gib], ...]) -> list[dict[str, Any]]:
        return [{"bytes": i.value.bytes, "text": i.value.text, "line": i.line, "rank": i.rank} for i in items]

    out: dict[str, Any] = {
        "load_weight_begin_avail": gibs(run.load_begin),
        "load_weight_end_avail": gibs(tuple(At(e.value.avail, e.line, e.rank) for e in run.load_end if e.value.avail)),
        "load_weight_end_usage": gibs(tuple(At(e.value.usage, e.line, e.rank) for e in run.load_end if e.value.usage)),
        "kv": [
            {
                "tokens": k.value.tokens,
                "dtype": k.value.dtype,
                "kv_bytes": k.value.kv.bytes if k.value.kv else None,
                "k_bytes": k.value.k.bytes if k.value.k else None,
                "v_bytes": k.value.v.bytes if k.value.v else None,
                "line": k.line,
                "rank": k.rank,
            }
            for k in run.kv
        ],
        "memory_pool_end_avail": gibs(run.pool_end),
        "summary": asdict(run.summary.value) | {"line": run.summary.line} if run.summary else None,
        "model_loading": gibs(run.model_loading),
        "available_kv": gibs(run.available_kv),
        "kv_cache_size": asdict(run.kv_cache_size.value) if run.kv_cache_size else None,
        "dcp_multiplier": run.dcp_multiplier.value if run.dcp_multiplier else None,
        "override": asdict(run.override.value) if run.override else None,
        "max_len_error": (
            {
                "max_model_len": run.max_len_error.value.max_model_len,
                "needed_bytes": run.max_len_error.value.needed.bytes,
                "available_bytes": run.max_len_error.value.available.bytes,
                "estimated_max_len": run.max_len_error.value.estimated_max_len,
            }
            if run.max_len_error
            else None
        ),
    }
    if out["summary"] is not None and run.summary is not None and run.summary.value.available_gpu_mem is not None:
        out["summary"]["available_gpu_mem"] = run.summary.value.available_gpu_mem.bytes
    return out

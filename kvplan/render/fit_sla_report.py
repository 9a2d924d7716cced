"""fit's SLA section and JSON (--require-ttft / --require-tpot / --require-throughput): each candidate's priced
figures with their bands, the verdict per requirement and how the figures were obtained."""

from __future__ import annotations

from typing import Any

from kvplan.perf.predict import Band
from kvplan.plan.fit import Fit, Outcome, layout
from kvplan.plan.fit_sla import MET, SlaCheck, SlaSpec, SlaTerm
from kvplan.render import Section

SHOWN = 8
"""SLA rows shown (the frontier's first, then the closest misses); the JSON has every priced candidate."""


def _cell(t: SlaTerm) -> str:
    v, lo, hi = (t.got.value, t.got.low, t.got.high)
    if t.unit == "us":
        return f"{v / 1000:,.1f} ms ({lo / 1000:,.1f} – {hi / 1000:,.1f})"
    return f"{v:,} ({lo:,} – {hi:,})"


def _verdict(c: SlaCheck) -> str:
    if c.error is not None:
        return f"not priced: {c.error}"
    off = [f"{t.name} {t.verdict}" for t in c.terms if t.verdict != MET]
    return "; ".join(off) if off else "met at the band's unfavourable end"


def sla_section(f: Fit) -> Section | None:
    q = f.query
    if q.sla is None:
        return None
    priced = [o for o in f.outcomes if o.sla is not None]
    ranked = list(f.admitted) + sorted((o for o in priced if not o.ok), key=lambda o: (-o.sla.margin_ppm, o.gpus))  # type: ignore[union-attr]
    names = [t.name for t in next((o.sla.terms for o in priced if o.sla and o.sla.terms), ())]
    rows = []
    for i, o in enumerate(ranked[:SHOWN], 1):
        assert o.sla is not None
        cells = [_cell(t) for t in o.sla.terms] if o.sla.error is None else ["–"] * len(names)
        d = o.deployment
        rows.append((str(i) if o.ok else "–", f"{o.gpus}×{d.gpu.key} {'SGLang' if d.engine == 'sglang' else 'vLLM'}",
                     layout(d), *cells, _verdict(o.sla)))  # fmt: skip
    heads = tuple(f"{n} {q.sla.at}" if n != "throughput" else "output tok/s" for n in names)
    rows_used = {o.sla.perf.coefficients.key for o in priced if o.sla and o.sla.perf}
    borrowed = sorted({o.sla.perf.borrowed for o in priced if o.sla and o.sla.perf and o.sla.perf.borrowed})
    note = (
        f"{q.sla.label}; priced by kvplan perf (closed loop in its steady state, the engine's scheduler, step times "
        f"from datasheet peaks × fitted efficiencies: rows {', '.join(sorted(rows_used)) or 'none'}"
        + (f"; borrowed: {'; '.join(borrowed)}" if borrowed else "")
        + "); band: × / ÷ (1 + 1.5 × the row's held-out MAPE); borrowed: 2 × it, at least the largest miss of a row"
        " borrowed so; "
        f"ranked by GPUs, then met at the band's unfavourable end, then margin; {len(priced):,} candidates priced"
    )
    return Section("SLA: latency and throughput under the load (estimated)", tuple(rows),
                   ("#", "GPUs, engine", "layout", *heads, "verdict"), note=note)  # fmt: skip


def _band(b: Band, unit: str) -> dict[str, int]:
    return {unit: b.value, f"{unit}_low": b.low, f"{unit}_high": b.high}


def _term_json(t: SlaTerm) -> dict[str, Any]:
    return {"name": t.name, "required": t.required, "unit": t.unit, "verdict": t.verdict,
            "margin_ppm": t.margin_ppm, **_band(t.got, "value")}  # fmt: skip


def sla_json(c: SlaCheck) -> dict[str, Any]:
    p = c.perf
    return {
        "ok": c.ok,
        "ok_at_band_edge": c.ok_at_band_edge,
        "margin_ppm": c.margin_ppm if c.error is None else None,
        "error": c.error,
        "terms": [_term_json(t) for t in c.terms],
        "coefficients": p.coefficients.key if p else None,
        "borrowed": (p.borrowed or None) if p else None,
        "hand_off_us": _band(c.hand_off_us, "value") if c.hand_off_us else None,
    }


def sla_spec_json(s: SlaSpec) -> dict[str, Any]:
    return {"isl": s.isl, "osl": s.osl, "concurrency": s.concurrency, "at": s.at, "ttft_us": s.ttft_us,
            "tpot_us": s.tpot_us, "output_tokens_per_s": s.output_tokens_per_s,
            "side": s.side or None, "range_ratio": s.range_ratio}  # fmt: skip


def sla_verdict_note(o: Outcome) -> str:
    """What the verdict line adds for the best candidate: a requirement met at the estimate, not the band's edge."""
    if o.sla is None or o.sla.ok_at_band_edge:
        return ""
    return "; SLA " + ", ".join(f"{t.name} {t.verdict}" for t in o.sla.terms if t.verdict != MET)

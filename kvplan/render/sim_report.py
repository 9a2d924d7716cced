"""Reports for `kvplan simulate`: one replay, or a hit-rate curve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.render import Report, Section, count, pct
from kvplan.render.applies import carry_data, carry_line
from kvplan.sim.result import HitStats, Occupancy, Refused, SimResult, Sweep, SweepPoint

if TYPE_CHECKING:  # a trace replay without a deployment never loads the models
    from kvplan.models.deploy import Carry


@dataclass(frozen=True)
class SimSetting:
    """What was simulated, in words and numbers, for the report's header and JSON."""

    trace_path: str
    trace_format: str
    trace_text: str
    block_tokens: int
    bad_records: int
    semantics_text: str
    paging_text: str
    capacity_text: str
    window_text: str
    measurement_text: str
    service_text: str = ""
    deployment: str = ""
    bytes_per_unit: int = 0
    """Bytes one capacity unit takes on one GPU (0: no plan)."""
    published: tuple[tuple[int, int], ...] = ()
    """(capacity tokens, hit rate ppm) published for this trace (Mooncake Figure 9)."""
    published_label: str = ""
    startup_error: str | None = None
    """The planned deployment's PoolPlan.startup_error: the engine would not start it (its pool is notional)."""
    carry: Carry | None = None
    """The planned deployment's file was written for another model: what it carries over (said under the title)."""
    context_text: str = ""
    """The deployment's context length and what its engine rejects ("": no deployment, nothing bounded)."""


def _rate(num: int, den: int) -> str:
    return pct(num, den) if den else "n/a"


def _ppm(num: int, den: int) -> int:
    return num * 1_000_000 // den if den else 0


def _us(us: int) -> str:
    if us >= 10_000_000:
        return f"{us / 1_000_000:,.1f} s"
    return f"{us / 1000:,.1f} ms"


def _units(n: int | None, unit: str, unit_tokens: int) -> str:
    if n is None:
        return "unbounded"
    return f"{n:,} {unit}s = {n * unit_tokens:,} tokens"


def _setting_rows(s: SimSetting) -> tuple[tuple[str, str], ...]:
    rows = [
        ("trace", f"{s.trace_path} ({s.trace_text})"),
        *((("malformed records skipped", count(s.bad_records)),) if s.bad_records else ()),
        ("semantics", s.semantics_text),
        ("blocks to pages", s.paging_text),
        ("capacity", s.capacity_text),
        *((("context length", s.context_text),) if s.context_text else ()),
        ("window", s.window_text),
        ("measured", s.measurement_text),
    ]
    if s.service_text:
        rows.append(("service model", s.service_text))
    return tuple(rows)


def _setting_data(s: SimSetting) -> dict[str, Any]:
    return {
        "trace": {
            "path": s.trace_path,
            "format": s.trace_format,
            "block_tokens": s.block_tokens,
            "bad_records": s.bad_records,
        },
        "semantics_text": s.semantics_text,
        "paging": s.paging_text,
        "capacity_text": s.capacity_text,
        "window_text": s.window_text,
        "measurement": s.measurement_text,
        "service": s.service_text or None,
        "deployment": s.deployment or None,
        "bytes_per_unit": s.bytes_per_unit or None,
        "written_for_another_model": carry_data(s.carry),
    }


def _refused_row(f: Refused, replayed: int) -> tuple[tuple[str, str, str], ...]:
    """The requests the engine rejected for their length, with their share of the trace's requests."""
    if f.context_tokens is None:
        return ()
    total = f.requests + replayed
    return (
        (
            "rejected: context length",
            count(f.requests),
            f"{_rate(f.requests, total)} of {total:,} requests, over the {f.context_tokens:,}-token context: "
            "never replayed",
        ),
    )


def _refused_data(f: Refused, replayed: int) -> dict[str, Any] | None:
    if f.context_tokens is None:
        return None
    total = f.requests + replayed
    return {
        "context_tokens": f.context_tokens,
        "requests": f.requests,
        "of_requests": total,
        "share_ppm": _ppm(f.requests, total),
        "input_tokens": f.input_tokens,
    }


def _refused_verdict(f: Refused, replayed: int) -> str:
    if not f.requests:
        return ""
    share = _rate(f.requests, f.requests + replayed)
    return f"; {f.requests:,} request(s) ({share}) rejected over the context length of {f.context_tokens:,}"


def simulate_report(r: SimResult, s: SimSetting) -> Report:
    st = r.stats
    sections = [
        Section("Setting", _setting_rows(s), ("", "")),
        Section("Prefix hit rate", _hit_rows(r), ("measure", "rate", "of")),
        Section("Hit length per request", tuple((k, f"{v:,} tokens") for k, v in st.length_percentiles().items()),
                ("", "")),
        Section("Hit-length histogram", _histogram_rows(st), ("hit tokens", "requests", "share")),
        Section("Pool", _pool_rows(r, s), ("", "", "")),
    ]  # fmt: skip
    data = _simulate_data(r, s)
    o = r.occupancy
    if o is not None:
        sections.insert(4, Section("Occupancy", _occupancy_rows(o, r.requests), ("", "", "")))
        data["occupancy"] = _occupancy_data(o)
    title = f"kvplan simulate: {s.trace_path} under {r.semantics} ({r.mode} mode, {r.policy}, window {r.window})"
    title += f"\n{carry_line(s.carry)}" if carry_line(s.carry) else ""
    verdict = f"hit rate {_rate(st.hit_tokens, st.measured_tokens)} of prefill tokens"
    verdict += _refused_verdict(r.refused, r.requests)
    if o is not None:
        verdict += f"; {o.preemptions:,} preemption(s), wait p99 {_us(o.wait_percentiles()['p99'])}"
    return Report("simulate", title, tuple(sections), data, verdict=verdict, startup_error=s.startup_error)


def _hit_rows(r: SimResult) -> tuple[tuple[str, str, str], ...]:
    st = r.stats
    return (
        (
            "token-weighted",
            _rate(st.hit_tokens, st.measured_tokens),
            f"{st.hit_tokens:,} of {st.measured_tokens:,} tokens",
        ),
        (
            "block-weighted",
            _rate(st.hit_units, st.measured_units),
            f"{st.hit_units:,} of {st.measured_units:,} {r.unit}s",
        ),
        ("requests measured", count(st.measured), f"of {r.requests:,} replayed"),
        *_refused_row(r.refused, r.requests),
    )


def _histogram_rows(st: HitStats) -> tuple[tuple[str, str, str], ...]:
    return tuple(
        (
            "0" if hi == 0 else f"> {lo:,}" if hi < 0 else f"{lo + 1:,} – {hi:,}",
            count(n),
            _rate(n, st.measured),
        )
        for lo, hi, n in st.histogram()
    )


def _pool_rows(r: SimResult, s: SimSetting) -> tuple[tuple[str, str, str], ...]:
    unit = r.unit
    return (
        ("pool", _units(r.capacity_units, unit, r.unit_tokens), s.capacity_text),
        ("evictions", f"{r.evictions:,} {unit}s", "to make room for new KV"),
        ("peak usage", f"{r.peak_used_units:,} {unit}s", _rate(r.peak_used_units, r.capacity_units or 0)),
        (
            "mean usage",
            f"{r.mean_used_units:,} {unit}s",
            "time-weighted, held by running requests" if r.mode == "occupancy" else "after each request",
        ),
        (
            "pool first full",
            f"request {r.filled_at:,}" if r.filled_at is not None else "never",
            ("before" if r.filled_before_window else "after") + " the window starts"
            if r.filled_at is not None and r.window_start
            else "",
        ),
        ("too long for the pool", count(r.too_long), "could not run at all"),
    )


def _simulate_data(r: SimResult, s: SimSetting) -> dict[str, Any]:
    st = r.stats
    return {
        **_setting_data(s),
        "semantics": r.semantics,
        "policy": r.policy,
        "mode": r.mode,
        "window": {"name": r.window, "start": r.window_start, "requests": r.requests},
        "unit": r.unit,
        "unit_tokens": r.unit_tokens,
        "capacity_units": r.capacity_units,
        "hit": {
            "tokens": st.hit_tokens,
            "measured_tokens": st.measured_tokens,
            "rate_ppm": _ppm(st.hit_tokens, st.measured_tokens),
            "units": st.hit_units,
            "measured_units": st.measured_units,
            "unit_rate_ppm": _ppm(st.hit_units, st.measured_units),
            "measured_requests": st.measured,
        },
        "hit_length_tokens": st.length_percentiles(),
        "hit_length_histogram": [{"above": lo, "up_to": hi, "requests": n} for lo, hi, n in st.histogram()],
        "evictions": r.evictions,
        "peak_used_units": r.peak_used_units,
        "mean_used_units": r.mean_used_units,
        "filled_at": r.filled_at,
        "filled_before_window": r.filled_before_window,
        "too_long": r.too_long,
        "input_tokens": r.input_tokens,
        "rejected_context": _refused_data(r.refused, r.requests),
    }


def _occupancy_rows(o: Occupancy, requests: int) -> tuple[tuple[str, str, str], ...]:
    wp = o.wait_percentiles()
    span = max(o.makespan_us, 1)
    return (
        ("completed", count(o.completed), f"of {requests:,} arrived"),
        ("admission wait p50 / p90 / p99", " / ".join(_us(wp[k]) for k in ("p50", "p90", "p99")), ""),
        ("admission wait max", _us(wp["max"]), ""),
        ("queue length max / mean", f"{o.max_queue:,} / {o.queue_area / span:,.2f}", "waiting requests"),
        ("running requests, peak", count(o.peak_running), ""),
        ("preemptions", count(o.preemptions), "recompute: the request re-queues at the head"),
        ("tokens prefilled", count(o.prefill_tokens), "misses and recomputation"),
        ("simulated time", _us(o.makespan_us), "first arrival to last finish"),
    )


def _occupancy_data(o: Occupancy) -> dict[str, Any]:
    return {
        "completed": o.completed,
        "preemptions": o.preemptions,
        "wait_us": o.wait_percentiles(),
        "max_queue": o.max_queue,
        "queue_area_request_us": o.queue_area,
        "used_area_page_us": o.used_area,
        "makespan_us": o.makespan_us,
        "peak_running": o.peak_running,
        "prefill_tokens": o.prefill_tokens,
        "timeline": [
            {"t_us": t, "running": run, "waiting": w, "held_pages": h, "cached_pages": c}
            for t, run, w, h, c in o.timeline
        ],
    }


def sweep_report(w: Sweep, s: SimSetting) -> Report:
    published = {c // w.unit_tokens: v for c, v in s.published}
    rows = []
    points = []
    for p in w.points:
        tokens = p.capacity_units * w.unit_tokens
        ref = published.get(p.capacity_units)
        row = [
            count(tokens),
            count(p.capacity_units),
            _rate(p.hit_tokens, w.measured_tokens),
            _rate(p.hit_units, w.measured_units),
            "yes" if (p.filled_before_window if w.window_start else p.filled) else "no",
        ]
        if s.published:
            row.append(f"{ref / 10_000:.1f}%" if ref is not None else "")
        rows.append(tuple(row))
        points.append(_point_data(w, p, ref))
    headers = ["capacity (tokens)", f"{w.unit}s", "hit rate", f"{w.unit}-weighted", "pool filled"]
    if s.published:
        headers.append(s.published_label or "published")
    filled_note = (
        "'pool filled': the pool filled before the window started (kvcache.ai reports only such points)"
        if w.window_start
        else "'pool filled': the replay ever filled the pool (if not, a bigger pool cannot do better)"
    )
    rejected = tuple((k, f"{v} {note}") for k, v, note in _refused_row(w.refused, w.requests))
    sections = [
        Section("Setting", (*_setting_rows(s), ("curve", w.method), *rejected), ("", "")),
        Section("Hit-rate curve", tuple(rows), tuple(headers), note=filled_note),
    ]
    if w.unbounded_hit_tokens is not None:
        sections.append(
            Section(
                "Unbounded pool (the trace's reuse bound)",
                (("hit rate", _rate(w.unbounded_hit_tokens, w.measured_tokens), f"{w.unbounded_hit_tokens:,} tokens"),),
                ("", "", ""),
            )
        )
    title = f"kvplan simulate: {s.trace_path} under {w.semantics} ({w.policy}, window {w.window}): hit-rate curve"
    title += f"\n{carry_line(s.carry)}" if carry_line(s.carry) else ""
    return Report("simulate", title, tuple(sections), _sweep_data(w, s, points), startup_error=s.startup_error)


def _point_data(w: Sweep, p: SweepPoint, ref: int | None) -> dict[str, Any]:
    return {
        "capacity_units": p.capacity_units,
        "capacity_tokens": p.capacity_units * w.unit_tokens,
        "hit_tokens": p.hit_tokens,
        "rate_ppm": _ppm(p.hit_tokens, w.measured_tokens),
        "hit_units": p.hit_units,
        "unit_rate_ppm": _ppm(p.hit_units, w.measured_units),
        "filled_before_window": p.filled_before_window,
        "filled": p.filled,
        "evictions": p.evictions,
        "peak_used_units": p.peak_used_units,
        "published_ppm": ref,
    }


def _sweep_data(w: Sweep, s: SimSetting, points: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **_setting_data(s),
        "semantics": w.semantics,
        "policy": w.policy,
        "mode": "order",
        "window": {"name": w.window, "start": w.window_start, "requests": w.requests},
        "unit": w.unit,
        "unit_tokens": w.unit_tokens,
        "measured_tokens": w.measured_tokens,
        "measured_units": w.measured_units,
        "method": w.method,
        "points": points,
        "unbounded_hit_tokens": w.unbounded_hit_tokens,
        "distinct_units_before_window": w.distinct_before_window,
        "input_tokens": w.input_tokens,
        "rejected_context": _refused_data(w.refused, w.requests),
    }

"""The report of `kvplan fit` and its optional plot."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvplan.engines.band import pool_band
from kvplan.fsio import check_target
from kvplan.models.weights_band import headline_tag
from kvplan.plan.fit import MEMORY_KNOB, Fit, Outcome, layout
from kvplan.plan.fit_pd import PdFit, pd_setting
from kvplan.plan.prefix import replay_approximation
from kvplan.render import Report, Section, count, first_screen, size
from kvplan.render.fit_sla_report import sla_json, sla_section, sla_spec_json, sla_verdict_note
from kvplan.render.plot import pyplot, save
from kvplan.sim.ranks import ENGINE_ROUTER, ROUTER_TEXT

PRUNED_KINDS = 8
"""Kinds of pruning reason shown (the JSON has every pruned candidate with its message)."""
PER_GPU_COUNT = 3
"""Frontier rows shown per GPU count (the JSON lists every admitted candidate)."""


def memory_note(o: Outcome) -> str:
    if o.memory is None:
        return "engine default"
    knob, value, default = o.memory
    return f"{knob} {value:g} (default {default:g})"


def tokens_short(n: int) -> str:
    """1,048,576 -> 1M, 131,072 -> 128K (binary, as kvplan reads them); other counts in full."""
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return count(n)


def binds(o: Outcome) -> str:
    if o.binding is None:
        return o.pruned or ""
    name, r = o.binding
    a = r.admission.request
    return (
        f"{name} @{a.concurrent}×{tokens_short(a.ctx_tokens)}"
        if r.concurrency
        else f"{name} @{tokens_short(a.ctx_tokens)}"
    )


def _ppm_pct(ppm: int) -> str:
    return f"{ppm / 10_000:.1f}%"


def _engine(o: Outcome) -> str:
    d = o.deployment
    return f"{'SGLang' if d.engine == 'sglang' else 'vLLM'} {d.engine_version}"


def _conc_cells(o: Outcome) -> tuple[str, ...]:
    return tuple(count(c.admission.max_concurrent) for c in o.checks if c.concurrency)


def _trace_cells(o: Outcome, with_trace: bool) -> tuple[str, ...]:
    """--trace: the most pages one rank held at once of its pool, and the hit rate (a replay cut short at its
    first shortfall measures none: '—')."""
    if not with_trace:
        return ()
    t = o.trace
    if t is None:
        return ("not replayed", "")
    if t.error is not None or t.bound_tokens is not None:
        return ("—", "—")
    peak = f"{count(t.peak_held_pages)} / {count(t.pool_pages)}"
    if t.stop is not None:
        return (peak + f" ({t.stop.what})", "—")
    return (peak, f"{t.hit_ppm / 10_000:.1f}%")


def _row(rank: int, o: Outcome, with_trace: bool = False) -> tuple[str, ...]:
    d = o.deployment
    mem = "" if o.memory is None else f" · {memory_note(o)}"
    return (
        str(rank),
        f"{o.gpus}×{d.gpu.key} {'SGLang' if d.engine == 'sglang' else 'vLLM'}",
        layout(d) + mem,
        tokens_short(o.largest_ctx),
        *_conc_cells(o),
        *_trace_cells(o, with_trace),
        _headroom(o),
        binds(o),
    )


def _headroom(o: Outcome) -> str:
    """'12.5 %', or '12.5 % (low end 4.1 %)' where the pool rests on an estimate: the frontier ranks by the low end."""
    if o.low_checks is None or o.low_headroom_ppm == o.headroom_ppm:
        return _ppm_pct(o.headroom_ppm)
    return f"{_ppm_pct(o.headroom_ppm)} (low end {_ppm_pct(o.low_headroom_ppm)})"


def _trace_json(o: Outcome) -> dict[str, Any] | None:
    t = o.trace
    if t is None:
        return None
    s = t.stop
    return {
        "ranks": t.ranks,
        "router": t.router,
        "pool_pages_per_rank": t.pool_pages,
        "page_tokens": t.page_tokens,
        "max_running_per_rank": t.max_running,
        "eagle": t.eagle,
        "peak_held_pages": t.peak_held_pages,
        "peak_running": t.peak_running,
        "holds": t.holds,
        "first_shortfall": None
        if s is None
        else {"request": s.index, "line": s.line, "time_us": s.time_us, "rank": s.rank, "what": s.what},
        "hit_tokens": t.hit_tokens if t.holds else None,
        "prompt_tokens": t.prompt_tokens,
        "hit_ppm": t.hit_ppm if t.holds else None,
        "hit_bound_tokens": t.bound_tokens,
        "rank_requests": list(t.rank_requests),
        "error": t.error,
        "ok": t.ok,
    }


def _json(o: Outcome) -> dict[str, Any]:
    d = o.deployment
    return {
        "gpus": o.gpus,
        "nodes": d.nodes,
        "gpus_per_node": d.gpus_per_node,
        "gpu": d.gpu.key,
        "engine": d.engine,
        "engine_version": d.engine_version,
        "tp": d.tp,
        "ep": d.ep,
        "dp_attention": d.dp_attention,
        "dcp": d.dcp,
        "kv_cache_dtype": d.kv_cache_dtype,
        "speculative_num_draft_tokens": d.speculative_num_draft_tokens,
        "context_length": d.context_length,
        "memory": memory_note(o),
        "kv_format": o.plan.kv_format if o.plan is not None else None,
        "pool_tokens": o.plan.logged_tokens if o.plan is not None else None,
        "engine_log": first_screen.engine_data(o.plan) if o.plan is not None else None,
        "largest_ctx_tokens": o.largest_ctx,
        "requirements": [
            {"check": c.label, "admitted": c.admission.admitted, "max_concurrent": c.admission.max_concurrent}
            for c in o.checks
        ],
        "headroom_ppm": o.headroom_ppm,
        "low_headroom_ppm": o.low_headroom_ppm,
        "pool_band": pool_band(o.plan).data() if o.plan is not None else None,
        "binds": binds(o),
        "trace": _trace_json(o),
        "admitted": o.ok,
    } | ({"sla": sla_json(o.sla)} if o.sla is not None else {})


def fit_report(f: Fit, emitted: str | None = None) -> Report:
    q = f.query
    asked = ", ".join(
        ([f"ctx {q.requirements.min_ctx_tokens:,}"] if q.requirements.min_ctx_tokens else [])
        + [f"{n} × {ctx:,} at once" for n, ctx in q.requirements.concurrency]
        + ([q.sla.label] if q.sla is not None else [])
    )
    sections = _candidate_sections(f)
    if (sla := sla_section(f)) is not None:
        sections.insert(1 if f.admitted else 0, sla)
    if q.trace is not None:
        sections.append(_trace_section(f))
    sections.append(_search_section(f))
    best, closest = f.best, f.closest
    shown_one = best or closest
    if shown_one is not None:  # the first screen: requirements in tokens, what binds, the engine's own lines
        sections[:0] = first_screen.fit_screen(shown_one, binds(shown_one) or "nothing", _fix(f))
    if best is not None:
        verdict = f"FITS{_estimated(best)}: {best.gpus} × {best.deployment.gpu.name}, {_engine(best)}, " \
                  f"{layout(best.deployment)}{sla_verdict_note(best)}"  # fmt: skip
    elif closest is not None:
        verdict = f"NOTHING FITS{_estimated(closest)} up to {q.max_gpus} GPUs; closest: {closest.gpus} × " \
                  f"{closest.deployment.gpu.name}, {_engine(closest)}, {layout(closest.deployment)}"  # fmt: skip
    else:
        verdict = "NOTHING FITS: the engines refuse every candidate"
    notes = (f"deployment written to {emitted} (kvplan admit --deploy {emitted} plans it as-is)",) if emitted else ()
    return Report(
        command="fit",
        title=f"kvplan fit: {f.query.model_ref} for {asked}",
        sections=tuple(sections),
        data=_fit_data(f, asked),
        verdict=verdict,
        verdict_ok=best is not None,
        notes=notes,
    )


def _candidate_sections(f: Fit) -> list[Section]:
    """The frontier (the best few per GPU count), the closest candidate where none fits, what was pruned."""
    q = f.query
    conc_heads = tuple(f"n@{tokens_short(ctx)}" for _, ctx in q.requirements.concurrency)
    tr = q.trace is not None
    trace_heads = ("trace peak pages / pool", "hit") if tr else ()
    headers = ("#", "GPUs, engine", "layout", "max ctx", *conc_heads, *trace_heads, "headroom", "binds")
    ranked = f.admitted
    shown: list[tuple[str, ...]] = []
    per: Counter[int] = Counter()
    for i, o in enumerate(ranked, 1):
        if per[o.gpus] < PER_GPU_COUNT:
            per[o.gpus] += 1
            shown.append(_row(i, o, tr))
    sections = []
    if shown:
        sections.append(
            Section(
                "Frontier: admitted candidates by GPUs, then headroom at the low end of the pool's band",
                tuple(shown),
                headers,
                note=f"the best {PER_GPU_COUNT} per GPU count of {len(ranked):,} admitted; headroom: the least share "
                "left in a capacity check that can bind (pool, running requests, SGLang's workspace; vLLM's profile "
                "run reserves its workspace) over the requirements",
            )
        )
    closest = f.closest
    if f.best is None and closest is not None:
        sections.append(
            Section(
                f"Nothing fits up to {q.max_gpus} GPUs; the closest candidate",
                (_row(0, closest, tr)[1:],),
                headers[1:],
                note="lacks: " + "; ".join(closest.lacks),
            )
        )
    reasons = Counter(_reason(o.pruned or "") for o in f.pruned)
    if reasons:
        sections.append(
            Section(
                "Pruned: what the engines refuse",
                tuple((count(n), r) for r, n in reasons.most_common(PRUNED_KINDS)),
                ("candidates", "the engine's reason (first clause; JSON has each message)"),
            )
        )
    return sections


def _search_section(f: Fit) -> Section:
    q = f.query
    return Section(
        "Search",
        (
            ("candidates planned", count(len(f.planned))),
            ("pruned by the engine", count(len(f.pruned))),
            ("skipped (more GPUs than the frontier needs)", count(f.skipped)),
            ("GPU types", ", ".join(g.name for g in q.gpus)),
            ("engines", ", ".join(q.engines)),
            (
                "not searched",
                "ep (ep <= tp splits experts tp ways: same plan; ep = tp only where the engine refuses ep 1), "
                "pp 1, the engine's page size",
            ),
        ),
    )


def _fit_data(f: Fit, asked: str) -> dict[str, object]:
    q, best, closest = f.query, f.best, f.closest
    return {
        "requirements": asked,
        "fits": best is not None,
        "best": _json(best) if best is not None else None,
        "closest": _json(closest) if best is None and closest is not None else None,
        "closest_lacks": list(closest.lacks) if best is None and closest is not None else [],
        "frontier": [_json(o) for o in f.admitted],
        "pruned": [
            {
                "gpus": o.gpus,
                "gpu": o.deployment.gpu.key,
                "engine": o.deployment.engine,
                "layout": layout(o.deployment),
                "reason": o.pruned,
            }
            for o in f.pruned
        ],
        "planned": len(f.planned),
        "skipped": f.skipped,
        **({"sla": sla_spec_json(q.sla)} if q.sla is not None else {}),
        "trace": None
        if q.trace is None
        else {
            "path": q.trace.path,
            "requests": q.trace.requests,
            "longest_request_tokens": q.trace.longest_tokens,
            "prompt_tokens": q.trace.prompt_tokens,
            "min_hit_ppm": q.trace.min_hit_ppm,
            "replays": sum(1 for t in q.trace.cache.values() if t.bound_tokens is None and t.error is None),
            "not_replayed": f.unreplayed,
        },
    }


def _trace_section(f: Fit) -> Section:
    spec = f.query.trace
    assert spec is not None
    fits = spec.cache.values()
    replays = sum(1 for t in fits if t.bound_tokens is None and t.error is None)
    bounded = sum(1 for t in fits if t.bound_tokens is not None)
    rows = [
        ("trace", f"{spec.path} ({spec.description})"),
        ("requests", f"{count(spec.requests)}; longest {count(spec.longest_tokens)} tokens (input + output): "
                     "required as a context"),
        ("a candidate holds it when", "every request is admitted on arrival, none is preempted, none is too long, "
                                      "in an occupancy replay of its own pools (per DP rank: its usable pages of its "
                                      "page size, its max_running_requests)"),
        ("service model", spec.service_text()),
        ("hit rate", f"hit tokens at first admission / the trace's {count(spec.prompt_tokens)} prompt tokens, all "
                     f"ranks; at least {spec.min_hit_ppm / 10_000:.1f}%"),
    ]  # fmt: skip
    for engine in dict.fromkeys(f.query.engines):
        rows.append((f"DP routing, {engine}", ROUTER_TEXT[ENGINE_ROUTER[engine]]))
    hybrid = next((o.plan for o in f.outcomes if o.trace is not None and o.plan is not None and o.plan.pools), None)
    if hybrid is not None:  # the same sentence simulate --deploy says: what the replay of a hybrid approximates
        rows.append(("hybrid model", replay_approximation(hybrid)))
    rows.append(
        (
            "replays",
            f"{count(replays)} (one per engine, pool pages, page size, DP ranks, running limit, MTP); "
            f"{count(bounded)} pools skipped: the trace's own reuse on their ranks caps the hit rate below the "
            f"minimum; {count(f.unreplayed)} candidates not replayed (ranked below a GPU count's frontier)",
        )
    )
    return Section("Trace: the deployment must hold it", tuple(rows))


def _fix(f: Fit) -> str | None:
    """Where nothing fits: what to widen (the model's own context limit needs the engine's override first)."""
    o = f.closest
    if f.best is not None or o is None:
        return None
    if any(c.admission.binding.name == "context length" for c in o.checks if not c.admission.admitted):
        return "over the model's context length: only with the engine's override (admit --set allow_long_context=true)"
    return f"none within --max-gpus {f.query.max_gpus}: raise it, or add --gpu types"


def _reason(message: str) -> str:
    """A pruning message's kind, to group candidates: its figures blanked ("#"), cut at 90 characters."""
    text = re.sub(r"(?<![\w.])\d[\d,.]*", "#", message)
    return text if len(text) <= 90 else text[:89] + "…"


def plot_fit(f: Fit, path: Path, reads: Iterable[Path] = ()) -> None:
    """GPUs vs requests at once at the first required concurrency's context (else the largest context), one
    series per GPU type / engine; matplotlib is imported only here (kvplan.render.plot)."""
    check_target(path, "--plot", reads)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    req = f.query.requirements
    series: dict[str, dict[int, int]] = {}
    for o in f.planned:
        key = f"{o.deployment.gpu.name} / {_engine(o)}"
        conc = [c.admission.max_concurrent for c in o.checks if c.concurrency]
        y = conc[0] if conc else o.largest_ctx
        s = series.setdefault(key, {})
        s[o.gpus] = max(s.get(o.gpus, 0), y)
    for key, pts in sorted(series.items()):
        xs = sorted(pts)
        ax.plot(xs, [pts[x] for x in xs], "-o", label=key)
    if req.concurrency:
        n, ctx = req.concurrency[0]
        ax.axhline(n, ls="--", color="grey", label=f"required {n} at {ctx:,}")
        ax.set_ylabel(f"requests of {ctx:,} tokens at once (best layout)")
    else:
        ax.set_ylabel("largest admitted context (tokens)")
    ax.set_xlabel("GPUs")
    ax.set_xscale("log", base=2)
    ax.set_title(f"kvplan fit: {f.query.model_ref}")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    save(plt, fig, path, reads)


def deploy_yaml(o: Outcome) -> str:
    """The chosen deployment as a kvplan deployment file that `admit`, `gate` and `validate` plan as-is."""
    d = o.deployment
    lines = [
        "schema_version: 1",
        f"name: {d.name}",
        f"description: written by kvplan fit ({layout(d)}, {d.gpus_per_node * d.nodes} GPUs reserved, {o.gpus} used)",
        f"model: {_yaml_str(d.model)}",
        f"engine: {d.engine}",
        f'engine_version: "{d.engine_version}"',
        f"gpu: {d.gpu.key}",
        f"gpus_per_node: {d.gpus_per_node}",
        f"nodes: {d.nodes}",
        f"tp: {d.tp}",
        *([f"ep: {d.ep}"] if d.ep > 1 else []),
        f"dp_attention: {d.dp_attention}",
        f"dcp: {d.dcp}",
        f"kv_cache_dtype: {d.kv_cache_dtype}",
    ]
    if d.context_length is not None:
        lines.append(f"context_length: {d.context_length}")
    if d.speculative_num_draft_tokens:
        lines.append(f"speculative_num_draft_tokens: {d.speculative_num_draft_tokens}")
    knob = MEMORY_KNOB[d.engine]
    if (v := getattr(d, knob)) is not None:
        lines.append(f"{knob}: {v}")
    return "\n".join(lines) + "\n"


def _yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a YAML double-quoted scalar


def _estimated(o: Outcome) -> str:
    """' (weights estimated ±N %)' when the candidate's plan rests on estimated weights (kvplan.models.weights_band)."""
    if o.plan is None:
        return ""
    return headline_tag(o.plan.arch, o.plan.knob("weights_per_gpu").origin)


def _pd_sla_rows(f: PdFit) -> list[tuple[str, ...]]:
    """--pd with SLAs: the load each side was priced under and the hand-off in the prefill side's TTFT."""
    sla, p = f.decode.query.sla, f.prefill.best
    if sla is None:
        return []
    rows: list[tuple[str, ...]]
    if f.sla_think_s is None:
        return [("SLA per side", "no decode instance priced: the prefill side is sized by memory alone")]
    rows = [
        ("decode side's load", f"{sla.concurrency:,} clients, closed loop; requests arrive prefilled (their steps "
                               "are their decodes alone): TPOT and throughput checked here"),
        ("prefill side's load", f"the {sla.concurrency:,} clients' requests of {sla.isl:,} tokens, each client sending "
                                f"the next {f.sla_think_s:,.2f} s after its first token (the decode side's time of a "
                                "request; the hand-off not counted): TTFT checked here"),
    ]  # fmt: skip
    h = p.sla.hand_off_us if p is not None and p.sla is not None else None
    if h is not None:
        low = ("only the last chunk's left after the prefill, send_kv_chunk" if p is not None and
               p.deployment.engine == "sglang" else "read once the prefill is done, as the estimate")  # fmt: skip
        rows.append(("hand-off in TTFT", f"{h.value / 1000:,.1f} ms ({h.low / 1000:,.1f} – {h.high / 1000:,.1f}) for "
                     f"{sla.isl:,} tokens at {f.link}: each rank's pages over its own link at line rate (low: {low};"
                     " high: every rank over one link)"))  # fmt: skip
    return rows


def pd_report(f: PdFit) -> Report:
    """--pd: the prefill and the decode instance, each the best of its own search, and the hand-off."""
    q = f.decode.query
    sections = []
    for side, result in (("Prefill", f.prefill), ("Decode", f.decode)):
        inner = fit_report(result)
        frontier = [s for s in inner.sections if s.title.startswith(("Frontier", "Nothing fits", "SLA"))]
        for s in frontier:
            sections.append(Section(f"{side} instance — {s.title}", s.rows, s.headers, s.note))
    p, d, t = f.prefill.best, f.decode.best, f.hand_off
    rows: list[tuple[str, ...]] = []
    if p is not None and d is not None:
        pe = pd_setting(p.deployment.engine, "prefill", f.backend)
        de = pd_setting(d.deployment.engine, "decode", f.backend)
        rows += [
            ("prefill instance", f"{p.gpus} × {p.deployment.gpu.name}, {_engine(p)}, {layout(p.deployment)} ({pe})"),
            ("decode instance", f"{d.gpus} × {d.deployment.gpu.name}, {_engine(d)}, {layout(d.deployment)} ({de})"),
            ("prefill : decode GPUs", f"{p.gpus} : {d.gpus}"),
            ("which side binds", f"{f.binds} (more GPUs, or less headroom at equal GPUs)"),
            (f"prefills of {count(f.longest_ctx)} in flight", f"{count(f.prefill_in_flight)} (the prefill memory)"),
        ]
    if t is not None:
        rows += [
            ("hand-off per request", f"{size(t.total_bytes)} = {size(t.bytes_per_rank)} × {t.ranks} ranks "
                                     f"({count(t.moved_tokens)} tokens in pages; {t.sharding})"),
            (f"time at {f.link}", f"{t.microseconds(t.bytes_per_rank) / 1000:.1f} ms per rank link"),
        ]  # fmt: skip
    rows += _pd_sla_rows(f)
    st = f.staging
    if st is not None:
        for x in st:
            rows.append((f"transfer staging, {x.side}", f"{size(x.bytes)} a GPU: {x.text}" if x.bytes else x.text))
    sections.append(Section("Prefill / decode split", tuple(rows)))
    ok = p is not None and d is not None
    tags = sorted({_estimated(o) for o in (p, d) if o is not None and _estimated(o)})
    verdict = (
        f"FITS (PD){tags[-1] if tags else ''}: {p.gpus} prefill + {d.gpus} decode GPUs; {f.binds} binds"
        if ok and p is not None and d is not None
        else "NOTHING FITS (PD): " + ("no prefill instance" if p is None else "no decode instance")
    )
    data = {
        "prefill": fit_report(f.prefill).data,
        "decode": fit_report(f.decode).data,
        "longest_ctx_tokens": f.longest_ctx,
        "binds": f.binds,
        "prefill_in_flight": f.prefill_in_flight,
        "hand_off": None
        if t is None
        else {
            "bytes_per_rank": t.bytes_per_rank,
            "ranks": t.ranks,
            "total_bytes": t.total_bytes,
            "moved_tokens": t.moved_tokens,
            "link_bytes_per_s": t.link_bytes_per_s,
        },
        "staging": None if st is None else {x.side: {"bytes_per_gpu": x.bytes, "source": x.text} for x in st},
        "fits": ok,
        "sla_prefill_think_s": f.sla_think_s,
    }
    return Report(command="fit", title=f"kvplan fit --pd: {q.model_ref}", sections=tuple(sections), data=data,
                  verdict=verdict, verdict_ok=ok)  # fmt: skip

"""Diagnosis -> Report: what ``kvplan doctor`` prints, and its JSON (raw integers)."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from kvplan.render import Report, Section, count, first_screen, nbytes, pct, ppm, size
from kvplan.render.applies import carry_line, for_model
from kvplan.render.doctor_chain import chain_data, chain_section, held_text
from kvplan.render.plan_sections import deployment_label, plan_data, remedy_detail
from kvplan.runbook.doctor import MATCH, Cause, Comparison, Diagnosis, LoggedPool, MemoryTerm, Revealed
from kvplan.runbook.evidence import BYTES, TEXT, Evidence, Fact
from kvplan.runbook.failures import FAILED_PREFIX, is_failure
from kvplan.runbook.parse import At, Gib, Run

_UNITS = {"tokens": "tokens", "rows": "rows per rank", "blocks": "blocks", "needed": "B needed"}


def _gib(g: Gib) -> str:
    """A figure as the log printed it (SGLang's "GB" are GiB)."""
    return f"{g.text} GiB"


def _where(at: At[Any] | None) -> str:
    if at is None:
        return ""
    return f"line {at.line}" + (f", {at.rank}" if at.rank else "")


def _value(lp: LoggedPool, v: int) -> str:
    return size(v) if lp.unit == "needed" else f"{v:,} {_UNITS[lp.unit]}"


def _ratio(num: int, den: int) -> str:
    return f"{num:,}/{den:,} = {num / den:.4f}" if den else "n/a"


def _range(c: Comparison | Cause, lp: LoggedPool) -> str:
    if c.low == c.high:
        return _value(lp, c.low)
    if lp.unit == "needed":
        return f"{size(c.low)} – {size(c.high)}"
    return f"{c.low:,} – {c.high:,} {_UNITS[lp.unit]}"


# --------------------------------------------------------------------------- sections


def _log_section(d: Diagnosis) -> Section:
    run = d.run
    starts = ", ".join(
        f"run {r.index}: lines {r.first_line}-{r.last_line}" + ("" if r.complete else " (incomplete)")
        for r in d.log.runs
    )
    ranks = ", ".join(run.ranks[:8]) + (" …" if len(run.ranks) > 8 else "")
    rows = [
        ("file", d.log.source, f"{d.log.lines:,} lines"),
        ("server starts", count(len(d.log.runs)), starts),
        ("used", f"run {run.index}", "the last complete one" if run.complete else "incomplete: no pool lines"),
        ("engine", (run.engine or "?") + (f" {run.version.value}" if run.version else ""), _where(run.version)),
        ("model", d.model.log_class or "not in the log", d.model.model_path or ""),
        ("ranks", count(len(run.ranks)) if run.ranks else "1", ranks),
    ]
    return Section("The log", tuple(rows), ("", "", ""))


def _figures(run: Run) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []

    def many(label: str, items: tuple[At[Gib], ...]) -> None:
        if items:
            values = sorted({i.value.text for i in items})
            first = min(items, key=lambda i: i.value.bytes)
            rows.append((label, " / ".join(f"{v} GiB" for v in values), f"{_where(first)} ({len(items)} rank(s))"))

    many("Load weight begin: avail mem", run.load_begin)
    many("Load weight end: avail mem", tuple(At(e.value.avail, e.line, e.rank) for e in run.load_end if e.value.avail))
    many("Load weight end: mem usage", tuple(At(e.value.usage, e.line, e.rank) for e in run.load_end if e.value.usage))
    for k in run.kv[:1]:
        v = k.value
        what = f"{v.tokens:,} rows" + (f", dtype {v.dtype}" if v.dtype else "")
        if v.kv is not None:
            what += f", KV size {_gib(v.kv)}"
        if v.k is not None and v.v is not None:
            what += f", K size {_gib(v.k)}, V size {_gib(v.v)}"
        rows.append(("KV Cache is allocated", what, f"{_where(k)} ({len(run.kv)} rank(s))"))
    for k in run.draft_kv[:1]:
        rows.append(("KV Cache is allocated (draft)", f"{k.value.tokens:,} rows", _where(k)))
    many("Memory pool end: avail mem", run.pool_end)
    if run.summary is not None:
        s = run.summary.value
        rows.append(
            (
                "scheduler summary",
                f"max_total_num_tokens={s.max_total_num_tokens:,}, max_running_requests={s.max_running_requests:,}, "
                f"context_len={s.context_len:,}",
                _where(run.summary),
            )
        )
    many("Model loading took", run.model_loading)
    many("Available KV cache memory", run.available_kv)
    if run.dcp_multiplier is not None:
        rows.append(("dcp_world_size multiplier", str(run.dcp_multiplier.value), _where(run.dcp_multiplier)))
    if run.override is not None:
        o = run.override.value
        rows.append(("num_gpu_blocks override", f"{o.profiled_blocks:,} → {o.blocks:,} blocks", _where(run.override)))
    if run.kv_cache_size is not None:
        k2 = run.kv_cache_size.value
        extra = f", max_model_len {k2.max_model_len:,} ({k2.concurrency}x)" if k2.max_model_len else ""
        rows.append(("GPU KV cache size", f"{k2.tokens:,} tokens{extra}", _where(run.kv_cache_size)))
    if run.concurrency is not None:
        c = run.concurrency.value
        rows.append(("Maximum concurrency", f"{c.max_model_len:,} tokens: {c.concurrency}x", _where(run.concurrency)))
    if run.max_len_error is not None:
        e = run.max_len_error.value
        est = f", estimated max length {e.estimated_max_len:,}" if e.estimated_max_len else ""
        rows.append(
            (
                "max seq len error",
                f"max_model_len {e.max_model_len:,} needs {_gib(e.needed)}, available {_gib(e.available)}{est}",
                _where(run.max_len_error),
            )
        )
    rows += [("startup error", e2.value, _where(e2)) for e2 in run.errors[:1]]
    return rows


def _revealed_rows(items: tuple[Revealed, ...]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for r in items:
        if not r.differs:
            continue
        status = "DIFFERS" if r.drift else "follows" if r.consequence else "differs (no pool effect)"
        origin = "set" if r.config_origin == "set" else "default"
        rows.append((r.knob, r.shown, f"{r.config_value} ({origin})", status, f"{r.source}, line {r.line}"))
    same = [f"{r.knob} {r.shown}" for r in items if not r.differs]
    if same:
        rows.append(("the same as the config", ", ".join(same), "", "", ""))
    return tuple(rows)


def _memory_rows(terms: tuple[MemoryTerm, ...]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for t in terms:
        if t.log is not None:
            log = _gib(t.log)
        elif t.low_bytes is not None and t.high_bytes is not None:
            log = f"{size(t.low_bytes)} – {size(t.high_bytes)}"
        else:
            log = "not in the log"
        ok = {True: "ok", False: "DIFFERS", None: "n/a"}[t.matches]
        rows.append((t.name, size(t.config_bytes) if t.config_bytes is not None else "n/a", log, ok))
    return tuple(rows)


def _pool_rows(d: Diagnosis) -> tuple[tuple[str, ...], ...]:
    c = d.comparison
    assert c is not None
    lp = c.logged
    rows = [
        ("(a) the config", _value(lp, c.config), f"{d.config.semantics if d.config else ''} plan of the deployment"),
        ("(a') + knobs the log reveals", _value(lp, c.revealed), f"{sum(r.differs for r in d.revealed)} differ"),
    ]
    if c.memory_from_log:
        rows.append(("(b) + the log's memory figures", _value(lp, c.expected), f"range {_range(c, lp)}"))
    rows.append(("the log", _value(lp, lp.value), f"{lp.source}, line {lp.line}"))
    rows.append(("result", "within" if c.within else "OUTSIDE", _tolerance(c)))
    return tuple(rows)


def _tolerance(c: Comparison) -> str:
    if not c.memory_from_log:
        return "exact: the log has no memory figures to round"
    text = "each logged GiB figure ±0.005 GiB (2 decimals)"
    if c.available_low is not None and c.available_high is not None:
        text += f" → KV budget {size(c.available_low)} – {size(c.available_high)}"
    if c.slack:
        text += f"; ±{c.slack} token for vLLM's float concurrency arithmetic"
    return text


def _cause_rows(d: Diagnosis) -> tuple[tuple[str, ...], ...]:
    c = d.comparison
    assert c is not None
    rows = []
    for cause in d.causes:
        rows.append(
            (
                cause.name,
                nbytes(cause.cell_bytes),
                _range(cause, c.logged),
                "EXPLAINS" if cause.explains else "no",
                cause.change,
            )
        )
    return tuple(rows)


# --------------------------------------------------------------------------- findings


def _findings(d: Diagnosis) -> list[str]:
    out: list[str] = []
    m = d.model
    if m.kind == "mha":
        out.append(_mha_finding(d))
        return out
    if m.kind == "class_differs" and d.config is not None:
        out.append(
            f"model: the log's model class is {m.log_class}, the deployment plans {m.arch_class}"
            f" ({d.config.arch.name if d.config else '?'}): pass --model with the config of the model the server ran"
        )
    for r in d.revealed:
        if r.differs:
            out.append(_knob_finding(r, d))
    for t in d.memory:
        if t.name.startswith("weights") and t.config_bytes == 0:
            out.append(
                "memory: the config's weights per GPU are 0 B (the model config has no parameter groups to estimate "
                "them from): pass --set weights_per_gpu=… or, for vLLM, --set kv_cache_memory=… from the log"
            )
        if t.matches is False and t.log is not None and t.config_bytes is not None:
            out.append(
                f"memory: {t.name}: the log says {_gib(t.log)}, the config {size(t.config_bytes)} "
                f"(differs by {size(abs(t.log.bytes - t.config_bytes))})"
            )
    c = d.comparison
    if d.memory_matches is False and c is not None and _value(c.logged, c.expected) != _value(c.logged, c.revealed):
        out.append(
            f"memory: with the log's memory the pool is {_value(c.logged, c.expected)} instead of "
            f"{_value(c.logged, c.revealed)}: pass the log's figures with --set weights_per_gpu=… / pre_load_free=… "
            "(SGLang) or kv_cache_memory=… (vLLM) to plan from them"
        )
    if d.comparison is not None:
        out += _accounting_findings(d, d.comparison)
    elif not d.run.complete:
        out.append(f"incomplete: run {d.run.index} stops at line {d.run.last_line} before any pool line")
    if d.per_rank is not None and (d.per_rank.dcp > 1 or not d.per_rank.consistent):
        p = d.per_rank
        if p.consistent:
            out.append(
                f"per-rank vs logical (not a mismatch): max_total_num_tokens={p.logical:,} (line {p.logical_line}) "
                f"is the logical count, dcp {p.dcp} × {p.rows:,} rows per rank ('#tokens' of the KV line, line "
                f"{p.rows_line}); each rank holds every {p.dcp}th token of a {64 * p.dcp}-token page, and the "
                f"indexer K cache is replicated on every rank"
            )
        else:
            out.append(
                f"per-rank vs logical: max_total_num_tokens={p.logical:,} is not dcp {p.dcp} × {p.rows:,} rows "
                f"(= {p.rows * p.dcp:,})"
            )
    if d.kv_size is not None:
        k = d.kv_size
        status = "ok" if k.matches else "DIFFERS"
        text = (
            f"KV size: {_gib(k.logged)} for {k.rows:,} rows (line {k.line}); the pool tensors of that many rows "
            f"(padding page and index pages included) take {size(k.expected_bytes)}: {status}"
        )
        if k.overcommits:
            text += (
                f"; that is {size(k.expected_bytes - k.budget_bytes)} more than the {size(k.budget_bytes)} KV budget "
                "(the pool over-commits: the cell charged fewer bytes than the rows take)"
            )
        out.append(text)
    if d.startup is not None:
        out.append(_startup_finding(d))
    return out


def _knob_finding(r: Revealed, d: Diagnosis) -> str:
    verb = "sets" if r.config_origin == "set" else "defaults to"
    text = f"knob {r.knob}: the server ran {r.shown} ({r.source}, line {r.line}); the config {verb} {r.config_value}"
    if r.explained_by:
        text += f" — {r.explained_by}"
    if r.consequence:
        return text + " (not a drift of its own)"
    # the knob's pools are tokens (rows for a KV-line-only SGLang log), never the bytes of a refusal
    unit = _UNITS.get(d.comparison.logged.unit, "tokens") if d.comparison else "tokens"
    unit = "tokens" if unit == _UNITS["needed"] else unit
    if r.changes_pool:
        text += f": pool {r.config_pool:,} → {r.pool_after:,} {unit}"
        if r.cell_after != r.cell_before:
            text += f", cell {r.cell_before:,} → {r.cell_after:,} B (ratio {_ratio(r.cell_after, r.cell_before)})"
    else:
        text += " (no effect on the pool)"
    return text


def _accounting_findings(d: Diagnosis, c: Comparison) -> list[str]:
    lp = c.logged
    semantics = d.best.semantics if d.best else ""
    out = []
    if c.within:
        what = "with the log's memory" if c.memory_from_log else "with the config's memory (the log prints none)"
        out.append(
            f"accounting: {what}, {semantics} builds {_range(c, lp)}; the log says {_value(lp, lp.value)} "
            f"({lp.source}, line {lp.line}): ok"
        )
        return out
    gap = lp.value - c.expected
    signed = f"{'+' if gap >= 0 else '−'}{_value(lp, abs(gap))}"  # a delta says its unit (B for a refusal's bytes)
    base = "with the log's memory" if c.memory_from_log else "with the config's memory (the log prints none)"
    text = (
        f"{'accounting' if c.memory_from_log else 'pool'}: {base} the config's accounting gives {_range(c, lp)}; "
        f"the log says {_value(lp, lp.value)} ({signed}, {pct(lp.value, c.expected)} of it)"
    )
    out.append(text)
    explaining = d.explaining
    for contra in [x for x in d.causes if x.explains and x.contradicted][:3]:
        out.append(f"not the cause: {contra.name} fits the count, but the log's byte figures contradict it "
                   f"({contra.contradicted})")  # fmt: skip
    for cause in explaining[:3]:
        line = f"cause: {cause.name}"
        if cause.cell_bytes != cause.expected_cell_bytes:
            line += (
                f": cell {cause.cell_bytes:,} B instead of {cause.expected_cell_bytes:,} B "
                f"(ratio {_ratio(cause.cell_bytes, cause.expected_cell_bytes)})"
            )
        line += f"; that pool is {_range(cause, lp)}, the log's {_value(lp, lp.value)} is within it"
        if cause.change:
            line += f" [{cause.change}]"
        out.append(line)
    if not explaining:
        text = "no known cause explains the gap (tested: " + "; ".join(x.name for x in d.causes[:8]) + ")"
        out.append(text)
        if d.implied is not None and (d.byte_fact is None or not d.byte_fact.agrees):
            out.append(_implied_text(d))  # asks whether the log is from another model: never when its rows agree
    return out


def _implied_text(d: Diagnosis) -> str:
    i = d.implied
    assert i is not None
    text = f"the log's own figures imply {i.low:,} – {i.high:,} B per pool row ({i.how})"
    cell = d.best.cell.total_bytes if d.best else 0
    if cell:
        text += f"; the deployment's cell is {cell:,} B"
    if i.shapes:
        text += "; that fits " + " or ".join(i.shapes)
    name = d.config.arch.name if d.config else "the model"
    return text + f": is the log from {name}? pass --model (preset, YAML or config.json) and --deploy for it"


def _mha_finding(d: Diagnosis) -> str:
    k = d.run.kv[0].value
    assert k.k is not None and k.v is not None
    text = (
        f"cannot check: the log's pool is MHA/GQA (K size {_gib(k.k)}, V size {_gib(k.v)} for {k.tokens:,} tokens) "
        f"from {d.model.log_class or 'an unnamed model'}"
        + (f" ({d.model.model_path})" if d.model.model_path else "")
        + f"; the config's model {d.model.arch_class} is MLA (one latent row per token), not this model. "
        "Give the log's own model config (--model, e.g. its config.json) and a deployment of it (--deploy)"
    )
    if d.implied is not None:
        text += f"; the log implies {d.implied.low:,} – {d.implied.high:,} B of K+V per token ({d.implied.how})"
    if d.log_budget is not None:
        lo, hi = d.log_budget
        kv_lo, kv_hi = k.k.low_bytes + k.v.low_bytes, k.k.high_bytes + k.v.high_bytes
        row = d.implied.high if d.implied is not None else 0
        # the pool is budget // row rows plus one padding row: K+V lies within one row of the budget
        ok = "consistent" if kv_lo <= hi + row and kv_hi >= lo - row else "NOT consistent"
        text += (
            f". Its own memory figures give a KV budget of {size(lo)} – {size(hi)} (Load weight end avail mem − "
            f"Load weight begin avail mem × (1 − mem_fraction_static)) for K+V of {size(kv_lo)} – {size(kv_hi)}: "
            f"{ok}"
        )
    return text


def _startup_finding(d: Diagnosis) -> str:
    s = d.startup
    assert s is not None
    if s.needed is None or s.available is None or s.max_model_len is None:
        return f"startup: the engine stopped (line {s.line}): {s.message}" + (
            "; kvplan's plan predicts it" if s.predicted else ""
        )
    text = (
        f"startup: vLLM refused to start (line {s.line}): one request of max_model_len {s.max_model_len:,} needs "
        f"{_gib(s.needed)} of KV, {_gib(s.available)} is available"
    )
    if s.planned_needed_bytes is not None:
        ok = "ok" if s.needed.covers(s.planned_needed_bytes) else "DIFFERS"
        text += f"; kvplan: {size(s.planned_needed_bytes)} needed ({ok})"
    if s.estimated_max_len is not None:
        text += f"; the largest max_model_len that fits is {s.estimated_max_len:,}"
        if s.planned_estimate_low is not None and s.planned_estimate_high is not None:
            lo, hi = s.planned_estimate_low, s.planned_estimate_high
            span = f"{lo:,}" if lo == hi else f"{lo:,} – {hi:,}"
            ok = "ok" if lo <= s.estimated_max_len <= hi else "DIFFERS"
            text += f" (kvplan: {span}, {ok})"
    if s.predicted:
        return text + ": kvplan's plan predicts the refusal"
    if s.planned_refuses:  # it refuses too, but its figures are not the log's: no prediction
        return text + ": kvplan's plan refuses too, with other figures (DIFFERS above): it does not predict this one"
    return text + ": kvplan's plan does NOT predict it"


def _checks(d: Diagnosis) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    a = d.admission
    if a is not None:
        b = a.binding
        verdict = "admitted" if a.admitted else f"REJECTED by {b.name}"
        detail = f"{a.pool_source}; largest admitted context {a.largest_ctx:,}; {a.max_concurrent:,} at once"
        if not a.admitted and b.unit == "bytes":
            detail = f"needs {size(b.need)}, has {size(b.have)} ({b.detail}); " + detail
        elif not a.admitted and b.unit:
            detail = f"needs {b.need:,} {b.unit}, has {b.have:,}; " + detail
        asked = "" if d.admission_asked else " (the server's context length; pass --ctx to ask)"
        rows.append((f"a {a.request.total_tokens:,}-token request{asked}", verdict, detail))
        for r in a.remedies[:3]:
            rows.append(("   would admit it", r.flags, f"{r.pool_tokens:,} tokens: {remedy_detail(r)}"))
    h = d.prefix
    if h is not None:
        paid = h.pairs_paid * 1_000_000 // h.pairs_total if h.pairs_total else 0
        rows.append(
            (
                f"a {h.hit_tokens:,}-token prefix hit in {h.ctx_tokens:,} tokens",
                f"{ppm(h.saved_ppm)} of the indexer work saved",
                f"reuses {h.reusable_tokens:,} tokens (naive hit ratio {ppm(h.naive_ppm)}); still paid: "
                f"suffix × prefix {h.pairs_cross:,} + suffix {h.pairs_suffix:,} pairs = {ppm(paid)} of "
                f"{h.pairs_total:,}: look at the hit-length distribution, not the hit rate",
            )
        )
    dr = d.decode
    if dr is not None:
        rows.append(
            (
                f"a decode step at context {dr.ctx_tokens:,} tokens",
                f"indexer K read {size(dr.indexer_read_bytes)} per request",
                f"{dr.ctx_tokens:,} × {dr.indexer_bytes_per_token:,} B: {dr.indexer_us:,} µs at "
                f"{dr.hbm_bytes_per_s / 1e12:.2f} TB/s, linear in context and in batch; the weights "
                f"({size(dr.weights_bytes)} from {dr.weights_source}, {dr.weights_us:,} µs) are read once a step for "
                f"the whole batch and the sparse MLA read ({size(dr.sparse_read_bytes)}, top-k) is flat in context: "
                f"{dr.batch_equal:,} such requests read as much indexer K as weights",
            )
        )
    return _numbered(rows)


def _numbered(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Checks numbered from 1 in the order shown (a remedy row under its check is not a check)."""
    out: list[tuple[str, str, str]] = []
    n = 0
    for label, verdict, detail in rows:
        if label.startswith("   "):
            out.append((label, verdict, detail))
        else:
            n += 1
            out.append((f"{n}. {label}", verdict, detail))
    return out


# --------------------------------------------------------------------------- the report


def _verdict(d: Diagnosis) -> str:
    """The one line read first: match, the cause, a refusal, another model, or what cannot be told and what to add."""
    h = d.headline
    c = d.comparison
    if h.kind == "refused" and d.startup is not None:
        s = d.startup
        if is_failure(s.message):  # it died (a traceback after the pool lines): no refusal figures to print
            return f"FAILED AT STARTUP (line {s.line}): {s.message.removeprefix(FAILED_PREFIX + ': ')}"
        text = f"REFUSED AT STARTUP (line {s.line}): "
        if s.needed is not None and s.available is not None and s.max_model_len is not None:
            text += (
                f"max_model_len {s.max_model_len:,} tokens needs {_gib(s.needed)} of KV cache, {_gib(s.available)} "
                "is available"
            )
            if s.estimated_max_len is not None:
                text += f"; the largest that fits is {s.estimated_max_len:,} tokens"
        else:
            text += s.message
        return text + ("; kvplan's plan predicts it" if s.predicted else "")
    if h.kind == "match":
        text = "MATCH: the log's figures are the ones the config implies"
        if c is not None:
            text = (
                f"MATCH: the pool is the one the config implies: {_value(c.logged, c.logged.value)} "
                f"(expected {_range(c, c.logged)})"
            )
        a = d.admission
        if d.admission_asked and a is not None and not a.admitted:
            text += f"; but a {a.request.total_tokens:,}-token request is REJECTED by {a.binding.name} (check 1)"
        return text
    if h.kind == "memory" and c is not None:
        text = (
            f"CAUSE: the log's memory, not the accounting: with the log's memory figures the config's rows give "
            f"{_range(c, c.logged)} and the log has {_value(c.logged, c.logged.value)}; the config's own figures give "
            f"{_value(c.logged, c.revealed)}"
        )
        differ = [t for t in d.memory if t.matches is False]
        if differ:
            t = differ[0]
            logged = _gib(t.log) if t.log is not None else f"{size(t.low_bytes or 0)} – {size(t.high_bytes or 0)}"
            text += f" ({t.name}: the log {logged}, the config {size(t.config_bytes or 0)})"
        return text + held_text(d.chain)
    if h.kind == "cause" and h.cause is not None:
        text = f"CAUSE: {h.cause.name}"
        if c is not None and c.logged.unit != "needed":
            mine = c.expected if c.memory_from_log else c.config
            whose = "with the log's memory the config gives" if c.memory_from_log else "the config's"
            text += f" (the log's pool: {_value(c.logged, c.logged.value)}; {whose} {_value(c.logged, mine)})"
        if h.cause.fitted:
            text += " — fitted: the log does not print this knob"
        elif not h.cause.explains and h.cause.bytes_agree:
            text += " — the log's byte figures fit its rows"
            if h.missing:
                text += "; add " + " and ".join(h.missing)
        return text
    if h.kind == "cause":
        drifts = [r for r in d.revealed if r.drift and r.knob == h.knob] or [r for r in d.revealed if r.drift]
        if drifts:
            r = drifts[0]
            text = f"CAUSE: the server ran {r.knob} {r.shown} where the config has {r.config_value}"
            if r.cell_after != r.cell_before:
                text += f" (row {r.cell_before:,} B → {r.cell_after:,} B)"
            if c is not None and c.within and c.memory_from_log:
                text += (
                    f"; with the log's knobs and memory the config's rows give {_range(c, c.logged)}, the log's "
                    f"{_value(c.logged, c.logged.value)}"
                )
            elif r.changes_pool:
                text += f"; with the config's memory: pool {r.config_pool:,} → {r.pool_after:,}"
            return text
    fact = d.byte_fact
    if h.kind == "model":
        name = d.config.arch.name if d.config else "the config's model"
        text = "ANOTHER MODEL: "
        if fact is not None:
            text += (
                f"the log's {fact.what} (line {fact.line}) is {nbytes(fact.low)} – {nbytes(fact.high)}; {name}'s rows "
                f"take {nbytes(fact.config)}"
            )
        if d.model.log_class:
            text += f"; the log's model is {d.model.log_class}"
        return text + "; add --model (the server's model config) and --deploy"
    if h.kind == "cannot_tell" and d.config is None and d.model.kind != "mha":
        e = d.evidence
        text = "CANNOT TELL whether this is the pool the config implies: " + (d.notes[0] if d.notes else "no config")
        if e is not None and e.pool_value is not None:
            text += f"; the log's pool: {e.pool_value:,} {e.pool_unit}"
        if e is not None and e.per_row_low is not None and e.per_row_high is not None:
            unit = e.per_row_unit.removeprefix("B ")
            if e.per_row_low:
                text += f", {nbytes(e.per_row_low)} – {nbytes(e.per_row_high)} {unit}"
            else:
                text += f", at most {nbytes(e.per_row_high)} {unit} ({e.per_row_how})"
            fits = [c.name for c in e.candidates if c.fits]
            if fits:
                text += f" (the rows of {', '.join(fits)})"
        return text + "; add " + " and ".join(h.missing)
    if h.kind == "cannot_tell":
        why = "the log lacks what the verdict needs"
        if d.model.kind in ("class_differs", "mha"):
            why = f"the log is from {d.model.log_class or 'another model'}, the config plans {d.model.arch_class}"
        elif c is not None and not c.memory_from_log:
            why = (
                f"the log's pool is {_value(c.logged, c.logged.value)}, the config's memory gives "
                f"{_value(c.logged, c.config)}, and the log prints no memory figure to tell why"
            )
            if fact is not None and fact.agrees:
                why += f" (its rows are the config's: {fact.what}, line {fact.line})"
        return f"CANNOT TELL: {why}; add " + " and ".join(h.missing)
    head = f"MISMATCH ({', '.join(d.problems)})"
    if c is not None and c.logged.unit != "needed":
        head += (
            f": the log's pool is {_value(c.logged, c.logged.value)}, the config implies {_value(c.logged, c.config)}"
        )
    if fact is not None and not fact.agrees:
        head += (
            f"; the rows' bytes differ ({fact.what}: {nbytes(fact.low)} – {nbytes(fact.high)}, "
            f"config {nbytes(fact.config)})"
        )
    if h.missing:
        return head + "; no known cause explains it: add " + " and ".join(h.missing)
    return head + "; no known cause explains it (the details list what was tested)"


def _fact_value(f: Fact) -> str:
    if f.unit == TEXT:
        return f.text
    lo, hi = f.low or 0, f.high or 0
    if f.unit == BYTES:
        if f.text:
            return f"{f.text} (±0.005 GiB)" if hi - lo < (1 << 24) else f.text
        show = nbytes if hi < (1 << 20) else size
        return show(lo) if lo == hi else f"{show(lo)} – {show(hi)}"
    return f"{lo:,} {f.unit}" if lo == hi else f"{lo:,} – {hi:,} {f.unit}"


_ORDER = {1: "1 bytes", 2: "2 memory", 3: "3 counts", 4: "4 derived"}


def _evidence_rows(d: Diagnosis, e: Evidence) -> tuple[tuple[str, ...], ...]:
    rows: list[tuple[str, ...]] = []
    f = d.byte_fact
    if f is not None:
        show = nbytes if f.high < (1 << 20) else size
        span = f"{show(f.low)} – {show(f.high)} vs {show(f.config)}"
        rows.append(("1 bytes", f"{f.what} vs the config's rows", span,
                     "agrees" if f.agrees else "DIFFERS", f"line {f.line}"))  # fmt: skip
    for x in e.facts:
        rows.append((_ORDER[x.order], x.name, _fact_value(x), x.how, f"line {x.line}" if x.line else ""))
    for shape in e.gqa_shapes[:4]:
        rows.append(("4 derived", "a K/V shape that fits the row", shape, "layers × kv heads per rank × head_dim", ""))
    for c in e.candidates:
        near = "fits" if c.fits else f"{c.distance_ppm / 10_000:.2f} % off"
        unit = e.per_row_unit.removeprefix("B ")
        rows.append(("4 derived", f"model candidate {c.name}", f"{c.bytes_per_row:,} B {unit}",
                     near, "ranked by bytes per row"))  # fmt: skip
    return tuple(rows)


def deployment_yaml(rows: tuple[tuple[str, str, str], ...]) -> str:
    """``--emit-deploy``: the proposed deployment as kvplan deployment YAML (values JSON-quoted: valid YAML)."""
    out = ["# a deployment proposed by kvplan doctor from a server log: check every value before planning with it"]
    for key, value, comment in rows:
        if key.startswith("#"):
            out.append(f"{key}: {comment}".rstrip())
            continue
        out.append(f"{key}: {value}" + (f"  # {comment}" if comment else ""))
    return "\n".join(out) + "\n"


def doctor_report(d: Diagnosis) -> Report:
    sections = [*first_screen.doctor_screen(d)]  # the pool in tokens, the fix, the summary lines side by side
    if d.evidence is not None:
        sections.append(Section("Evidence, in the order it decides", _evidence_rows(d, d.evidence),
                                ("order", "fact", "value", "how", "where")))  # fmt: skip
    sections.append(_log_section(d))
    figures = _figures(d.run)
    if figures:
        sections.append(Section("What the log reports", tuple(figures), ("line", "value", "where")))
    if d.revealed:
        sections.append(
            Section(
                "Knobs the log reveals", _revealed_rows(d.revealed), ("knob", "log", "config", "status", "evidence")
            )
        )
    if d.memory:
        sections.append(Section("Memory of one GPU", _memory_rows(d.memory), ("term", "config", "log", "agrees")))
    if d.chain is not None:
        sections.append(chain_section(d.chain))
    if d.comparison is not None:
        title = "The pool" if d.comparison.logged.unit != "needed" else "KV one max_model_len request needs"
        sections.append(Section(title, _pool_rows(d), ("", "", "")))
        if d.causes:
            sections.append(
                Section(
                    "Known causes, each re-planned", _cause_rows(d), ("cause", "cell", "pool", "explains", "change")
                )
            )
    findings = _findings(d)
    if findings:
        sections.append(Section("Findings", tuple((str(i), f) for i, f in enumerate(findings, start=1)), ("", "")))
    checks = _checks(d)
    if checks:
        sections.append(Section("Runbook checks", tuple(checks), ("", "", "")))
    title = f"kvplan doctor: {d.log.source}"
    if d.best is None:
        title += " (the log alone: no --model or --deploy)"
    if d.best is not None:
        title += f" against {d.best.arch.name} on {deployment_label(d.best)}, {d.best.semantics}"
        title += f"\n{carry_line(d.best.deployment.carry)}" if d.best.deployment.carry else ""
    return Report(
        "doctor",
        title,
        tuple(sections),
        {**_data(d, findings), "engine_log": first_screen.doctor_data(d)},
        verdict=_verdict(d),
        verdict_ok=d.status == MATCH,
        notes=d.notes,
    )


def _data(d: Diagnosis, findings: list[str]) -> dict[str, Any]:
    run = d.run
    c = d.comparison
    h = d.headline
    e = d.evidence
    data: dict[str, Any] = {
        "status": d.status,
        "headline": {
            "kind": h.kind,
            "cause": h.cause.key if h.cause is not None else None,
            "cause_name": h.cause.name if h.cause is not None else None,
            "missing": list(h.missing),
        },
        "evidence": None
        if e is None
        else {
            "facts": [{f.name: getattr(x, f.name) for f in fields(x)} for x in e.facts],
            "bytes_per_row": None
            if e.per_row_low is None
            else {"low": e.per_row_low, "high": e.per_row_high, "unit": e.per_row_unit, "how": e.per_row_how},
            "candidates": [{f.name: getattr(x, f.name) for f in fields(x)} for x in e.candidates],
            "refused": e.refused,
            "hybrid": e.hybrid,
        },
        "byte_fact": None if d.byte_fact is None else {**asdict(d.byte_fact), "agrees": d.byte_fact.agrees},
        "problems": list(d.problems),
        "notes": list(d.notes),
        "findings": findings,
        "log": {
            "source": d.log.source,
            "lines": d.log.lines,
            "runs": [
                {
                    "index": r.index,
                    "first_line": r.first_line,
                    "last_line": r.last_line,
                    "engine": r.engine,
                    "complete": r.complete,
                }
                for r in d.log.runs
            ],
            "used_run": run.index,
        },
        "model": asdict(d.model),
        "figures": _figure_data(run),
        "revealed": [
            {
                "knob": r.knob,
                "log_value": r.value,
                "config_value": r.config_value
                if isinstance(r.config_value, int | float | str | bool)
                else str(r.config_value),
                "differs": r.differs,
                "changes_pool": r.changes_pool,
                "config_pool": r.config_pool,
                "pool_after": r.pool_after,
                "cell_before": r.cell_before,
                "cell_after": r.cell_after,
                "source": r.source,
                "line": r.line,
            }
            for r in d.revealed
        ],
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
        "pool": None,
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
        "admission": (
            {
                "ctx_tokens": d.admission.request.total_tokens,
                "asked": d.admission_asked,
                "admitted": d.admission.admitted,
                "binding": d.admission.binding.name,
                "largest_ctx": d.admission.largest_ctx,
                "usable_tokens": d.admission.usable_tokens,
                "pool_source": d.admission.pool_source,
                "remedies": [
                    {**asdict(r), "detail": remedy_detail(r), "sizes": dict(r.sizes)} for r in d.admission.remedies
                ],
            }
            if d.admission
            else None
        ),
        "prefix": (
            {
                "ctx_tokens": d.prefix.ctx_tokens,
                "hit_tokens": d.prefix.hit_tokens,
                "reusable_tokens": d.prefix.reusable_tokens,
                "pairs_total": d.prefix.pairs_total,
                "pairs_saved": d.prefix.pairs_saved,
                "pairs_paid": d.prefix.pairs_paid,
                "saved_ppm": d.prefix.saved_ppm,
                "naive_ppm": d.prefix.naive_ppm,
            }
            if d.prefix
            else None
        ),
        "decode": asdict(d.decode) if d.decode else None,
        "plan": for_model(d.best.arch, plan_data(d.best)) if d.best else None,
    }
    if c is not None:
        data["pool"] = {
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
        }
    return data


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

"""The doctor's findings (what the log shows against the plan, in sentences) and its numbered checks."""

from __future__ import annotations

from kvplan.render import pct, ppm, size
from kvplan.render.doctor_text import UNITS, logged_gib, pool_value, range_text, ratio
from kvplan.render.plan_sections import remedy_detail
from kvplan.runbook.doctor import Comparison, Diagnosis, Revealed


def findings_of(d: Diagnosis) -> list[str]:
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
                f"memory: {t.name}: the log says {logged_gib(t.log)}, the config {size(t.config_bytes)} "
                f"(differs by {size(abs(t.log.bytes - t.config_bytes))})"
            )
    c = d.comparison
    if (
        d.memory_matches is False
        and c is not None
        and pool_value(c.logged, c.expected) != pool_value(c.logged, c.revealed)
    ):
        out.append(
            f"memory: with the log's memory the pool is {pool_value(c.logged, c.expected)} instead of "
            f"{pool_value(c.logged, c.revealed)}: pass the log's figures with "
            "--set weights_per_gpu=… / pre_load_free=… "
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
            f"KV size: {logged_gib(k.logged)} for {k.rows:,} rows (line {k.line}); the pool tensors of that many rows "
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
    unit = UNITS.get(d.comparison.logged.unit, "tokens") if d.comparison else "tokens"
    unit = "tokens" if unit == UNITS["needed"] else unit
    if r.changes_pool:
        text += f": pool {r.config_pool:,} → {r.pool_after:,} {unit}"
        if r.cell_after != r.cell_before:
            text += f", cell {r.cell_before:,} → {r.cell_after:,} B (ratio {ratio(r.cell_after, r.cell_before)})"
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
            f"accounting: {what}, {semantics} builds {range_text(c, lp)}; the log says {pool_value(lp, lp.value)} "
            f"({lp.source}, line {lp.line}): ok"
        )
        return out
    gap = lp.value - c.expected
    signed = f"{'+' if gap >= 0 else '−'}{pool_value(lp, abs(gap))}"  # a delta says its unit (B for a refusal's bytes)
    base = "with the log's memory" if c.memory_from_log else "with the config's memory (the log prints none)"
    text = (
        f"{'accounting' if c.memory_from_log else 'pool'}: {base} the config's accounting gives {range_text(c, lp)}; "
        f"the log says {pool_value(lp, lp.value)} ({signed}, {pct(lp.value, c.expected)} of it)"
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
                f"(ratio {ratio(cause.cell_bytes, cause.expected_cell_bytes)})"
            )
        line += f"; that pool is {range_text(cause, lp)}, the log's {pool_value(lp, lp.value)} is within it"
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
        f"cannot check: the log's pool is MHA/GQA (K size {logged_gib(k.k)}, V size {logged_gib(k.v)} "
        f"for {k.tokens:,} tokens) "
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
        f"{logged_gib(s.needed)} of KV, {logged_gib(s.available)} is available"
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


def checks_of(d: Diagnosis) -> list[tuple[str, str, str]]:
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

"""Diagnosis -> Report: what ``kvplan doctor`` prints, and its JSON (raw integers)."""

from __future__ import annotations

from kvplan.render import Report, Section, count, first_screen, nbytes, size
from kvplan.render.applies import carry_line
from kvplan.render.doctor_chain import chain_section, held_text
from kvplan.render.doctor_data import report_data
from kvplan.render.doctor_findings import checks_of, findings_of
from kvplan.render.doctor_text import UNITS, logged_gib, pool_value, range_text, where
from kvplan.render.plan_sections import deployment_label
from kvplan.runbook.doctor import MATCH, Cause, Comparison, Diagnosis, MemoryTerm, Revealed, StartupCheck
from kvplan.runbook.evidence import BYTES, TEXT, Evidence, Fact
from kvplan.runbook.failures import FAILED_PREFIX, is_failure
from kvplan.runbook.parse import At, Gib, Run

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
        ("engine", (run.engine or "?") + (f" {run.version.value}" if run.version else ""), where(run.version)),
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
            rows.append((label, " / ".join(f"{v} GiB" for v in values), f"{where(first)} ({len(items)} rank(s))"))

    many("Load weight begin: avail mem", run.load_begin)
    many("Load weight end: avail mem", tuple(At(e.value.avail, e.line, e.rank) for e in run.load_end if e.value.avail))
    many("Load weight end: mem usage", tuple(At(e.value.usage, e.line, e.rank) for e in run.load_end if e.value.usage))
    for k in run.kv[:1]:
        v = k.value
        what = f"{v.tokens:,} rows" + (f", dtype {v.dtype}" if v.dtype else "")
        if v.kv is not None:
            what += f", KV size {logged_gib(v.kv)}"
        if v.k is not None and v.v is not None:
            what += f", K size {logged_gib(v.k)}, V size {logged_gib(v.v)}"
        rows.append(("KV Cache is allocated", what, f"{where(k)} ({len(run.kv)} rank(s))"))
    for k in run.draft_kv[:1]:
        rows.append(("KV Cache is allocated (draft)", f"{k.value.tokens:,} rows", where(k)))
    many("Memory pool end: avail mem", run.pool_end)
    if run.summary is not None:
        s = run.summary.value
        rows.append(
            (
                "scheduler summary",
                f"max_total_num_tokens={s.max_total_num_tokens:,}, max_running_requests={s.max_running_requests:,}, "
                f"context_len={s.context_len:,}",
                where(run.summary),
            )
        )
    many("Model loading took", run.model_loading)
    many("Available KV cache memory", run.available_kv)
    if run.dcp_multiplier is not None:
        rows.append(("dcp_world_size multiplier", str(run.dcp_multiplier.value), where(run.dcp_multiplier)))
    if run.override is not None:
        o = run.override.value
        rows.append(("num_gpu_blocks override", f"{o.profiled_blocks:,} → {o.blocks:,} blocks", where(run.override)))
    if run.kv_cache_size is not None:
        k2 = run.kv_cache_size.value
        extra = f", max_model_len {k2.max_model_len:,} ({k2.concurrency}x)" if k2.max_model_len else ""
        rows.append(("GPU KV cache size", f"{k2.tokens:,} tokens{extra}", where(run.kv_cache_size)))
    if run.concurrency is not None:
        c = run.concurrency.value
        rows.append(("Maximum concurrency", f"{c.max_model_len:,} tokens: {c.concurrency}x", where(run.concurrency)))
    if run.max_len_error is not None:
        e = run.max_len_error.value
        est = f", estimated max length {e.estimated_max_len:,}" if e.estimated_max_len else ""
        rows.append(
            (
                "max seq len error",
                f"max_model_len {e.max_model_len:,} needs {logged_gib(e.needed)}, "
                f"available {logged_gib(e.available)}{est}",
                where(run.max_len_error),
            )
        )
    rows += [("startup error", e2.value, where(e2)) for e2 in run.errors[:1]]
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
            log = logged_gib(t.log)
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
        (
            "(a) the config",
            pool_value(lp, c.config),
            f"{d.config.semantics if d.config else ''} plan of the deployment",
        ),
        ("(a') + knobs the log reveals", pool_value(lp, c.revealed), f"{sum(r.differs for r in d.revealed)} differ"),
    ]
    if c.memory_from_log:
        rows.append(("(b) + the log's memory figures", pool_value(lp, c.expected), f"range {range_text(c, lp)}"))
    rows.append(("the log", pool_value(lp, lp.value), f"{lp.source}, line {lp.line}"))
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
                range_text(cause, c.logged),
                "EXPLAINS" if cause.explains else "no",
                cause.change,
            )
        )
    return tuple(rows)


# --------------------------------------------------------------------------- the report


def _band_verdict(c: Comparison) -> str:
    assert c.band is not None
    low, high, why = c.band
    return (
        f"WITHIN THE EXPECTED ERROR of a config-alone plan (band {low:,} – {high:,} {UNITS[c.logged.unit]}: "
        f"{why}): the log has {pool_value(c.logged, c.logged.value)}, the config's point "
        f"{pool_value(c.logged, c.config)}"
    )


def _verdict(d: Diagnosis) -> str:
    """The one line read first: match, the cause, a refusal, another model, or what cannot be told and what to add."""
    h = d.headline
    if h.kind == "refused" and d.startup is not None:
        return _refused_verdict(d.startup)
    if h.kind == "band" and d.comparison is not None and d.comparison.band is not None:
        return _band_verdict(d.comparison)
    if h.kind == "match":
        return _match_verdict(d)
    if h.kind == "memory" and d.comparison is not None:
        return _memory_verdict(d, d.comparison)
    if h.kind == "cause" and h.cause is not None:
        return _cause_verdict(d, h.cause)
    if h.kind == "cause" and (drift := _drift_verdict(d)) is not None:
        return drift
    if h.kind == "model":
        return _model_verdict(d)
    if h.kind == "cannot_tell" and d.config is None and d.model.kind != "mha":
        return _log_alone_verdict(d)
    if h.kind == "cannot_tell":
        return _cannot_tell_verdict(d)
    return _mismatch_verdict(d)


def _refused_verdict(s: StartupCheck) -> str:
    if is_failure(s.message):  # it died (a traceback after the pool lines): no refusal figures to print
        return f"FAILED AT STARTUP (line {s.line}): {s.message.removeprefix(FAILED_PREFIX + ': ')}"
    text = f"REFUSED AT STARTUP (line {s.line}): "
    if s.needed is not None and s.available is not None and s.max_model_len is not None:
        text += (
            f"max_model_len {s.max_model_len:,} tokens needs {logged_gib(s.needed)} of KV cache, "
            f"{logged_gib(s.available)} "
            "is available"
        )
        if s.estimated_max_len is not None:
            text += f"; the largest that fits is {s.estimated_max_len:,} tokens"
    else:
        text += s.message
    return text + ("; kvplan's plan predicts it" if s.predicted else "")


def _match_verdict(d: Diagnosis) -> str:
    c = d.comparison
    text = "MATCH: the log's figures are the ones the config implies"
    if c is not None:
        text = (
            f"MATCH: the pool is the one the config implies: {pool_value(c.logged, c.logged.value)} "
            f"(expected {range_text(c, c.logged)})"
        )
    a = d.admission
    if d.admission_asked and a is not None and not a.admitted:
        text += f"; but a {a.request.total_tokens:,}-token request is REJECTED by {a.binding.name} (check 1)"
    return text


def _memory_verdict(d: Diagnosis, c: Comparison) -> str:
    text = (
        f"CAUSE: the log's memory, not the accounting: with the log's memory figures the config's rows give "
        f"{range_text(c, c.logged)} and the log has {pool_value(c.logged, c.logged.value)}; "
        "the config's own figures give "
        f"{pool_value(c.logged, c.revealed)}"
    )
    differ = [t for t in d.memory if t.matches is False]
    if differ:
        t = differ[0]
        logged = logged_gib(t.log) if t.log is not None else f"{size(t.low_bytes or 0)} – {size(t.high_bytes or 0)}"
        text += f" ({t.name}: the log {logged}, the config {size(t.config_bytes or 0)})"
    return text + held_text(d.chain)


def _cause_verdict(d: Diagnosis, cause: Cause) -> str:
    c = d.comparison
    text = f"CAUSE: {cause.name}"
    if c is not None and c.logged.unit != "needed":
        mine = c.expected if c.memory_from_log else c.config
        whose = "with the log's memory the config gives" if c.memory_from_log else "the config's"
        text += f" (the log's pool: {pool_value(c.logged, c.logged.value)}; {whose} {pool_value(c.logged, mine)})"
    if cause.fitted:
        text += " — fitted: the log does not print this knob"
    elif not cause.explains and cause.bytes_agree:
        text += " — the log's byte figures fit its rows"
        if d.headline.missing:
            text += "; add " + " and ".join(d.headline.missing)
    return text


def _drift_verdict(d: Diagnosis) -> str | None:
    """A knob the server ran with that the config does not have (None: no such knob)."""
    c = d.comparison
    drifts = [r for r in d.revealed if r.drift and r.knob == d.headline.knob] or [r for r in d.revealed if r.drift]
    if not drifts:
        return None
    r = drifts[0]
    text = f"CAUSE: the server ran {r.knob} {r.shown} where the config has {r.config_value}"
    if r.cell_after != r.cell_before:
        text += f" (row {r.cell_before:,} B → {r.cell_after:,} B)"
    if c is not None and c.within and c.memory_from_log:
        text += (
            f"; with the log's knobs and memory the config's rows give {range_text(c, c.logged)}, the log's "
            f"{pool_value(c.logged, c.logged.value)}"
        )
    elif r.changes_pool:
        text += f"; with the config's memory: pool {r.config_pool:,} → {r.pool_after:,}"
    return text


def _model_verdict(d: Diagnosis) -> str:
    fact = d.byte_fact
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


def _log_alone_verdict(d: Diagnosis) -> str:
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
    return text + "; add " + " and ".join(d.headline.missing)


def _cannot_tell_verdict(d: Diagnosis) -> str:
    c, fact = d.comparison, d.byte_fact
    why = "the log lacks what the verdict needs"
    if d.model.kind in ("class_differs", "mha"):
        why = f"the log is from {d.model.log_class or 'another model'}, the config plans {d.model.arch_class}"
    elif c is not None and not c.memory_from_log:
        why = (
            f"the log's pool is {pool_value(c.logged, c.logged.value)}, the config's memory gives "
            f"{pool_value(c.logged, c.config)}, and the log prints no memory figure to tell why"
        )
        if fact is not None and fact.agrees:
            why += f" (its rows are the config's: {fact.what}, line {fact.line})"
    return f"CANNOT TELL: {why}; add " + " and ".join(d.headline.missing)


def _mismatch_verdict(d: Diagnosis) -> str:
    c, fact, h = d.comparison, d.byte_fact, d.headline
    head = f"MISMATCH ({', '.join(d.problems)})"
    if c is not None and c.logged.unit != "needed":
        head += (
            f": the log's pool is {pool_value(c.logged, c.logged.value)}, "
            f"the config implies {pool_value(c.logged, c.config)}"
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
    findings = findings_of(d)
    if findings:
        sections.append(Section("Findings", tuple((str(i), f) for i, f in enumerate(findings, start=1)), ("", "")))
    checks = checks_of(d)
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
        {**report_data(d, findings), "engine_log": first_screen.doctor_data(d)},
        verdict=_verdict(d),
        verdict_ok=d.status == MATCH,
        notes=d.notes,
    )

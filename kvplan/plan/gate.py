"""The CI gate: key figures of a config, a lock of them, rules against it (pure).

`figures` condenses a plan into what a platform team promises or watches; `check` compares a re-planned config
with its locked figures and with the requirements, and returns every rule with its verdict.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from kvplan import __version__
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import model_positions
from kvplan.errors import InputError
from kvplan.limits import (
    MAX_GPU_BYTES,
    MAX_GPUS,
    MAX_LAYERS,
    MAX_TOKENS,
    JsonError,
    bounded_int,
    int_text,
    strict_json,
)
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import ENGINE_KNOBS, KNOBS, Deployment, Requirements
from kvplan.models.weights_band import band_for
from kvplan.plan.admit import Admission, Request, admit, largest_admitted
from kvplan.plan.lock_check import REBUILD, check_digest, check_invariants, entries_digest
from kvplan.plan.workspace import WorkspaceQuery, workspace

LOCK_SCHEMA_VERSION = 3
"""2: `page_tokens` became `rank_page_tokens` and `logical_page_tokens` (schema 1 locks are read and migrated);
3: the lock carries `digest`, of its entries (kvplan.plan.lock_check): a lock without one is rebuilt, never trusted."""
DEFAULT_CONTEXTS = (128 * 1024, 1 << 20)


@dataclass(frozen=True, kw_only=True)
class Figures:
    """What `kvplan.lock` records for one config (all ints or short strings)."""

    engine: str
    model: str
    mla_layout: str
    main_bytes_per_row: int
    indexer_bytes_per_row: int
    draft_bytes_per_row: int
    cell_bytes: int
    indexer_layers: int
    dcp: int
    rank_page_tokens: int
    """The engine's page (block) size on one rank: SGLang page_size, vLLM block_size (64 for DSA)."""
    logical_page_tokens: int
    """Tokens of one request one page holds across the dcp ranks (rank_page_tokens × dcp): what usable_pages count."""
    available_bytes: int
    pool_rows_per_gpu: int
    pool_tokens: int
    """Logical capacity: SGLang's logged max_total_num_tokens, vLLM's blocks × 64 × dcp."""
    usable_pages: int
    """Pages of logical_page_tokens tokens a request can get (vLLM: without the null block)."""
    largest_admitted_ctx: int
    max_running_requests: int
    workspace_left_bytes: int
    engine_starts: bool
    concurrency: dict[str, int] = field(default_factory=dict)
    """Requests of each promised context (key: tokens) admitted at once."""


def figures(plan: PoolPlan, contexts: tuple[int, ...]) -> Figures:
    c = plan.cell
    ws = workspace(plan, WorkspaceQuery())
    conc = {}
    for ctx in sorted(set(contexts)):
        a = admit(plan, Request(ctx_tokens=ctx), remedies=False)
        conc[str(ctx)] = a.max_concurrent if a.admitted else 0
    return Figures(
        engine=f"{plan.engine} {plan.engine_version}",
        model=plan.arch.name,
        mla_layout=plan.kv_format,
        main_bytes_per_row=c.main_bytes,
        indexer_bytes_per_row=c.indexer_bytes,
        draft_bytes_per_row=c.draft_main_bytes + c.draft_indexer_bytes,
        cell_bytes=c.total_bytes,
        indexer_layers=plan.indexer_layers,
        dcp=plan.dcp,
        rank_page_tokens=plan.page_tokens,
        logical_page_tokens=plan.logical_page_tokens,
        available_bytes=plan.available_bytes,
        pool_rows_per_gpu=plan.rows,
        pool_tokens=plan.logged_tokens,
        usable_pages=plan.usable_pages,
        largest_admitted_ctx=largest_admitted(plan),
        max_running_requests=plan.max_running_requests,
        workspace_left_bytes=ws.left_bytes,
        engine_starts=plan.startup_error is None,
        concurrency=conc,
    )


def promised_contexts(req: Requirements, max_positions: int | None = None) -> tuple[int, ...]:
    """The contexts the requirements promise; without any, the defaults (128K, 1M) the model can hold at all
    (up to ``max_positions``, else that length itself): a 131,072-position Llama is not asked about 1M."""
    ctxs = tuple(c for _, c in req.concurrency) + ((req.min_ctx_tokens,) if req.min_ctx_tokens else ())
    if ctxs:
        return ctxs
    if max_positions is None:
        return DEFAULT_CONTEXTS
    return tuple(c for c in DEFAULT_CONTEXTS if c <= max_positions) or (max_positions,)


# --------------------------------------------------------------------------- the lock


def lock_document(entries: dict[str, Figures]) -> dict[str, Any]:
    configs = {name: asdict(entries[name]) for name in sorted(entries)}
    return {
        "schema_version": LOCK_SCHEMA_VERSION,
        "kvplan_version": __version__,
        "digest": entries_digest(configs),
        "configs": configs,
    }


def lock_text(entries: dict[str, Figures]) -> str:
    """The lock file's bytes: stable key order, so re-locking an unchanged config gives the same file."""
    return json.dumps(lock_document(entries), indent=2, sort_keys=True) + "\n"


def merge(old: dict[str, Figures], new: dict[str, Figures], *, prune: bool) -> dict[str, Figures]:
    """`kvplan lock` updates the entries it is given and keeps the rest (all others dropped with prune)."""
    return dict(new) if prune else {**old, **new}


# What each field of an entry may hold: (low, high) for ints. Bytes are per GPU; headroom may be negative.
_MAX_NAME_CHARS = 200


def _int_bounds(name: str) -> tuple[int, int]:
    if name in ("available_bytes", "workspace_left_bytes"):
        return -MAX_GPU_BYTES, MAX_GPU_BYTES
    if name.endswith(("_bytes", "_bytes_per_row")):
        return 0, MAX_GPU_BYTES
    if name == "dcp":
        return 1, MAX_GPUS
    if name.endswith("page_tokens"):
        return 1, MAX_TOKENS
    if name == "indexer_layers":
        return 0, MAX_LAYERS
    return 0, MAX_TOKENS


def _int(value: object, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: expected an integer, got {_kind(value)}")
    return bounded_int(value, name=where, low=low, high=high)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, float):
        return f"a number with a fraction ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _printable(text: str) -> str:
    """A key as an error message may quote it: control characters escaped (one line, no terminal escapes)."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:_MAX_NAME_CHARS])
    return out + ("…" if len(text) > _MAX_NAME_CHARS else "")


def _migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 recorded the rank page as `page_tokens`; the logical page is it × dcp."""
    out = dict(data)
    if "page_tokens" in out and "rank_page_tokens" not in out:
        out["rank_page_tokens"] = out.pop("page_tokens")
        rank, dcp = out["rank_page_tokens"], out.get("dcp")
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (rank, dcp)):
            out["logical_page_tokens"] = rank * dcp
    return out


def figures_from_json(name: str, data: object, source: str, schema: int = LOCK_SCHEMA_VERSION) -> Figures:
    """One entry, every field checked for its type and bounds (bool is not an int, no floats, no nulls)."""
    where = f"{source}: configs.{_printable(name)}"
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object, got {_kind(data)}")
    if schema == 1:
        data = _migrate_v1(data)
    known = {f.name: f.type for f in fields(Figures)}
    missing = set(known) - set(data)
    if missing:
        raise InputError(f"{where}: missing {', '.join(sorted(missing))} (re-run kvplan lock)")
    unknown = set(data) - set(known)
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r} (written by another kvplan? re-run kvplan lock)")
    values: dict[str, Any] = {}
    for key, kind in known.items():
        v, at = data[key], f"{where}.{key}"
        if kind == "str":
            if not isinstance(v, str) or len(v) > _MAX_NAME_CHARS or _printable(v) != v:
                raise InputError(f"{at}: expected a short string without control characters, got {_kind(v)}")
            values[key] = v
        elif kind == "bool":
            if not isinstance(v, bool):
                raise InputError(f"{at}: expected true or false, got {_kind(v)}")
            values[key] = v
        elif kind == "int":
            values[key] = _int(v, at, *_int_bounds(key))
        else:  # concurrency: {"<ctx tokens>": requests}
            if not isinstance(v, dict):
                raise InputError(f"{at}: expected an object, got {_kind(v)}")
            conc = {}
            for ctx, n in v.items():
                tokens = bounded_int(int_text(ctx, name=f"{at} key"), name=f"{at} key", low=1, high=MAX_TOKENS)
                conc[str(tokens)] = _int(n, f"{at}.{ctx}", 0, MAX_TOKENS)
            values[key] = conc
    check_invariants(values, where)
    return Figures(**values)


def parse_lock(text: str, source: str) -> dict[str, Figures]:
    """A lock file's text -> its entries, or one InputError naming the file, the key path or the line; a lock
    whose digest is missing or does not match its entries is an error too (a baseline edited by hand)."""
    entries, untrusted = parse_lock_untrusted(text, source)
    if untrusted is not None:
        raise InputError(f"{source} {untrusted}: {REBUILD}")
    return entries


def parse_lock_untrusted(text: str, source: str) -> tuple[dict[str, Figures], str | None]:
    """The entries, each valid on its own, and why they are not the ones kvplan wrote (None: they are), a phrase
    to follow the lock's name.

    ``kvplan lock`` reads its old lock so: it may rebuild an edited lock, never keep its entries as they are.
    """
    try:
        doc = strict_json(text)
    except JsonError as e:
        at = f"{source}:{e.line}" if e.line is not None else source
        raise InputError(f"{at}: {e.problem} (corrupt lock file?)") from None
    entries = read_lock(doc, source)
    assert isinstance(doc, dict)  # read_lock refuses anything else
    return entries, check_digest(doc)


def read_lock(doc: object, source: str) -> dict[str, Figures]:
    """The lock's entries, each field and the relations between them checked, or one clear error: not a lock,
    a newer schema, a broken entry. The digest is the caller's (``parse_lock``)."""
    if not isinstance(doc, dict) or "configs" not in doc or "schema_version" not in doc:
        raise InputError(f"{source}: not a kvplan lock file (no schema_version / configs)")
    version = doc["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"{source}: schema_version: expected an integer, got {_kind(version)}")
    if version > LOCK_SCHEMA_VERSION:
        raise InputError(
            f"{source}: written by a newer kvplan (lock schema {version} > {LOCK_SCHEMA_VERSION}): upgrade kvplan"
        )
    if version < 1:
        raise InputError(f"{source}: schema_version: {version} is not a lock schema (1..{LOCK_SCHEMA_VERSION})")
    kv = doc.get("kvplan_version", "")
    if not isinstance(kv, str):
        raise InputError(f"{source}: kvplan_version: expected a string, got {_kind(kv)}")
    configs = doc["configs"]
    if not isinstance(configs, dict):
        raise InputError(f"{source}: configs: expected an object, got {_kind(configs)}")
    for name in configs:
        if not name or _printable(name) != name:
            raise InputError(f"{source}: configs: {_printable(name)!r} is not a config path (control characters)")
    return {name: figures_from_json(name, data, source, version) for name, data in configs.items()}


# --------------------------------------------------------------------------- rules


NEW_RATIO = 100
"""A figure more than 100 times its baseline is "new", not a percentage (0 -> 330,560 is not +33,056,000 %)."""


def is_new(before: int, after: int) -> bool:
    """A change from a zero or near-zero baseline: said as "new" (render and the gate rule alike)."""
    return after > 0 and (before <= 0 or after > before * NEW_RATIO)


@dataclass(frozen=True)
class Rule:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, kw_only=True)
class GateResult:
    config: str
    before: Figures | None
    after: Figures
    rules: tuple[Rule, ...]
    weights_band_ppm: int | None = None
    """The band of the plan's weights when they are an estimate (kvplan.models.weights_band); None: read."""
    plan: PoolPlan | None = field(default=None, compare=False, repr=False)
    """The plan checked now (for the engine's own summary lines on the first screen)."""
    checks: tuple[RequirementCheck, ...] = field(default=(), compare=False, repr=False)
    """The requirements' admissions behind the rules (their tokens on the first screen)."""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rules)

    @property
    def capacity_change_ppm(self) -> int | None:
        if self.before is None or is_new(self.before.pool_tokens, self.after.pool_tokens):
            return None  # no percentage from a zero or near-zero baseline
        if self.before.pool_tokens <= 0:
            return 0  # 0 -> 0 (an engine that still does not start): nothing changed
        return (self.after.pool_tokens - self.before.pool_tokens) * 1_000_000 // self.before.pool_tokens


def check(config: str, plan: PoolPlan, req: Requirements, locked: Figures | None) -> GateResult:
    after = figures(plan, promised_contexts(req, model_positions(plan)))
    rules: list[Rule] = [
        Rule("engine starts", plan.startup_error is None, plan.startup_error or "the pool is built"),
    ]
    if locked is not None:
        drop_allowed = req.max_capacity_drop_ppm or 0
        change = (after.pool_tokens - locked.pool_tokens) * 1_000_000 // max(locked.pool_tokens, 1)
        shown = "new" if is_new(locked.pool_tokens, after.pool_tokens) else f"{change / 10_000:+.2f}%"
        rules.append(
            Rule(
                f"capacity drop <= {drop_allowed / 10_000:g}%",
                -change <= drop_allowed,
                f"pool {locked.pool_tokens:,} -> {after.pool_tokens:,} tokens ({shown})",
            )
        )
    checks = requirement_admissions(plan, req)
    for r in checks:
        a = r.admission
        if r.concurrency:
            detail = f"{a.max_concurrent} fit" + ("" if a.admitted else f"; rejected by {a.binding.name}")
        else:
            detail = "admitted" if a.admitted else f"rejected by {a.binding.name}; largest {a.largest_ctx:,}"
        rules.append(Rule(r.label, a.admitted, detail))
    band = band_for(plan.arch, plan.knob("weights_per_gpu").origin)
    return GateResult(
        config=config,
        before=locked,
        after=after,
        rules=tuple(rules),
        weights_band_ppm=band.ppm if band else None,
        plan=plan,
        checks=checks,
    )


@dataclass(frozen=True)
class RequirementCheck:
    label: str
    admission: Admission
    concurrency: bool
    """An N@ctx requirement (N admitted at once), else the context requirement (one admitted)."""


def requirement_admissions(plan: PoolPlan, req: Requirements) -> tuple[RequirementCheck, ...]:
    """The requirements' checks, one admission each (the one place `gate` and `fit` check them): the context
    ``min_ctx_tokens`` admitted once, and each N@ctx admitted N at a time."""
    out = []
    if req.min_ctx_tokens is not None:
        a = admit(plan, Request(ctx_tokens=req.min_ctx_tokens), remedies=False)
        out.append(RequirementCheck(f"admits {req.min_ctx_tokens:,} tokens", a, False))
    for n, ctx in req.concurrency:
        a = admit(plan, Request(ctx_tokens=ctx, concurrent=n), remedies=False)
        out.append(RequirementCheck(f"admits {n} × {ctx:,} tokens", a, True))
    return tuple(out)


# --------------------------------------------------------------------------- diff


@dataclass(frozen=True)
class KnobEffect:
    knob: str
    """A deployment knob, or "model" / "engine" for a model or engine (version) change."""
    old: str
    new: str
    pool_tokens: int
    cell_bytes: int
    startup_error: str | None
    base_pool_tokens: int
    """The pool the change was applied to: OLD's, or OLD's settings on NEW's engine after an engine change."""
    kind: str = "knob"


_OWN_ROWS = {"model", "engine", "engine_version"}


def _apply(knob: str, old: object, new: object, arch: ModelArch, dep: Deployment, base: int, kind: str) -> KnobEffect:
    try:
        p = plan_pool(arch, dep)
    except InputError as e:
        return KnobEffect(knob, str(old), str(new), 0, 0, str(e), base, kind)
    return KnobEffect(knob, str(old), str(new), p.logged_tokens, p.cell.total_bytes, p.startup_error, base, kind)


def diff(old: PoolPlan, new: PoolPlan) -> tuple[KnobEffect, ...]:
    """What changed from OLD to NEW, each change applied alone and re-planned.

    A model change and an engine change (engine or its version) are one row each, applied to OLD. Knobs are
    compared by their resolved values (the plan's knobs, engine defaults computed), so an explicit 64 against a
    default that resolves to 64 is no change, and a default that only follows another knob is not a change of
    its own. After an engine change, knobs are applied to OLD's settings on NEW's engine (without the knobs
    only OLD's engine reads, which go with the engine), and only knobs NEW's engine reads are applied.
    """
    a, b = old.deployment, new.deployment
    out: list[KnobEffect] = []
    if old.arch != new.arch:
        out.append(_apply("model", old.arch.name, new.arch.name, new.arch, a, old.logged_tokens, "model"))
    base_dep, base_plan = a, old
    if (a.engine, a.engine_version) != (b.engine, b.engine_version):
        base_dep = replace(a, engine=b.engine, engine_version=b.engine_version, **_other_engine_knobs(b.engine))
        eff = _apply(
            "engine", f"{a.engine} {a.engine_version}", f"{b.engine} {b.engine_version}", old.arch, base_dep,
            old.logged_tokens, "engine",
        )  # fmt: skip
        out.append(eff)
        try:
            base_plan = plan_pool(old.arch, base_dep)
        except InputError:
            return tuple(out)  # OLD's settings do not plan on NEW's engine: knobs alone mean nothing there
    ra = {k.name: k.value for k in base_plan.knobs}
    rb = {k.name: k.value for k in new.knobs}
    for name in KNOBS:
        if name in _OWN_ROWS:
            continue
        only = ENGINE_KNOBS.get(name)
        if only is not None and only[0] != b.engine:
            continue  # a knob NEW's engine does not read
        raw_a, raw_b = getattr(base_dep, name), getattr(b, name)
        if raw_a == raw_b:
            continue  # the same setting; a resolved difference follows another knob
        va, vb = ra.get(name, _show(raw_a)), rb.get(name, _show(raw_b))
        if va == vb:
            continue  # e.g. page_size 64 set against the default, which is 64
        dep = replace(base_dep, **{name: raw_b})
        out.append(_apply(name, va, vb, old.arch, dep, base_plan.logged_tokens, "knob"))
    return tuple(out)


def _other_engine_knobs(engine: str) -> dict[str, Any]:
    """The knobs only the other engine reads, back to their defaults (the engine refuses them otherwise)."""
    defaults: dict[str, Any] = {f.name: f.default for f in fields(Deployment)}
    return {k: defaults[k] for k, (only, _) in ENGINE_KNOBS.items() if only != engine}


def _show(v: object) -> object:
    key = getattr(v, "key", None)
    return key if key is not None else v

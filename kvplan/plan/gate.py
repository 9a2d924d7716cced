"""The CI gate: key figures of a config, a lock of them, rules against it (pure).

`figures` condenses a plan into what a platform team promises or watches; `check` compares a re-planned config
with its locked figures and with the requirements, and returns every rule with its verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from kvplan import __version__
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment, Requirements
from kvplan.plan.admit import Request, admit, largest_admitted
from kvplan.plan.workspace import WorkspaceQuery, workspace

LOCK_SCHEMA_VERSION = 1
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
    page_tokens: int
    available_bytes: int
    pool_rows_per_gpu: int
    pool_tokens: int
    """Logical capacity: SGLang's logged max_total_num_tokens, vLLM's blocks × 64 × dcp."""
    usable_pages: int
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
        mla_layout=plan.mla_layout.value,
        main_bytes_per_row=c.main_bytes,
        indexer_bytes_per_row=c.indexer_bytes,
        draft_bytes_per_row=c.draft_main_bytes + c.draft_indexer_bytes,
        cell_bytes=c.total_bytes,
        indexer_layers=plan.indexer_layers,
        dcp=plan.dcp,
        page_tokens=plan.page_tokens,
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


def promised_contexts(req: Requirements) -> tuple[int, ...]:
    ctxs = tuple(c for _, c in req.concurrency) + ((req.min_ctx_tokens,) if req.min_ctx_tokens else ())
    return ctxs or DEFAULT_CONTEXTS


# --------------------------------------------------------------------------- the lock


def lock_document(entries: dict[str, Figures]) -> dict[str, Any]:
    return {
        "schema_version": LOCK_SCHEMA_VERSION,
        "kvplan_version": __version__,
        "configs": {name: asdict(entries[name]) for name in sorted(entries)},
    }


def figures_from_json(name: str, data: object, source: str) -> Figures:
    if not isinstance(data, dict):
        raise InputError(f"{source}: configs.{name}: expected an object")
    known = {f.name for f in fields(Figures)}
    missing = known - set(data)
    if missing:
        raise InputError(f"{source}: configs.{name}: missing {', '.join(sorted(missing))} (re-run kvplan lock)")
    try:
        return Figures(**{k: data[k] for k in known})
    except TypeError as e:
        raise InputError(f"{source}: configs.{name}: {e}") from None


def read_lock(doc: object, source: str) -> dict[str, Figures]:
    """The lock's entries, or one clear error: not a lock, a newer schema, a broken entry."""
    if not isinstance(doc, dict) or "configs" not in doc or "schema_version" not in doc:
        raise InputError(f"{source}: not a kvplan lock file (no schema_version / configs)")
    version = doc["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"{source}: schema_version: expected an integer, got {version!r}")
    if version > LOCK_SCHEMA_VERSION:
        raise InputError(
            f"{source}: written by a newer kvplan (lock schema {version} > {LOCK_SCHEMA_VERSION}): upgrade kvplan"
        )
    configs = doc["configs"]
    if not isinstance(configs, dict):
        raise InputError(f"{source}: configs: expected an object")
    return {name: figures_from_json(name, data, source) for name, data in configs.items()}


# --------------------------------------------------------------------------- rules


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

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rules)

    @property
    def capacity_change_ppm(self) -> int | None:
        if self.before is None or not self.before.pool_tokens:
            return None
        return (self.after.pool_tokens - self.before.pool_tokens) * 1_000_000 // self.before.pool_tokens


def check(config: str, plan: PoolPlan, req: Requirements, locked: Figures | None) -> GateResult:
    after = figures(plan, promised_contexts(req))
    rules: list[Rule] = [
        Rule("engine starts", plan.startup_error is None, plan.startup_error or "the pool is built"),
    ]
    if locked is not None:
        drop_allowed = req.max_capacity_drop_ppm or 0
        change = (after.pool_tokens - locked.pool_tokens) * 1_000_000 // max(locked.pool_tokens, 1)
        rules.append(
            Rule(
                f"capacity drop <= {drop_allowed / 10_000:g}%",
                -change <= drop_allowed,
                f"pool {locked.pool_tokens:,} -> {after.pool_tokens:,} tokens ({change / 10_000:+.2f}%)",
            )
        )
    if req.min_ctx_tokens is not None:
        a = admit(plan, Request(ctx_tokens=req.min_ctx_tokens), remedies=False)
        rules.append(
            Rule(
                f"admits {req.min_ctx_tokens:,} tokens",
                a.admitted,
                "admitted" if a.admitted else f"rejected by {a.binding.name}; largest {a.largest_ctx:,}",
            )
        )
    for n, ctx in req.concurrency:
        a = admit(plan, Request(ctx_tokens=ctx, concurrent=n), remedies=False)
        rules.append(
            Rule(
                f"admits {n} × {ctx:,} tokens",
                a.admitted,
                f"{a.max_concurrent} fit" + ("" if a.admitted else f"; rejected by {a.binding.name}"),
            )
        )
    return GateResult(config=config, before=locked, after=after, rules=tuple(rules))


# --------------------------------------------------------------------------- diff


@dataclass(frozen=True)
class KnobEffect:
    knob: str
    old: object
    new: object
    pool_tokens: int
    cell_bytes: int
    startup_error: str | None


_NOT_KNOBS = {"name", "source", "explicit", "description"}


def diff(old_arch: ModelArch, old: Deployment, new_arch: ModelArch, new: Deployment) -> tuple[KnobEffect, ...]:
    """Each changed knob applied alone to OLD and re-planned; the last row is NEW itself."""
    out = []
    for f in fields(Deployment):
        if f.name in _NOT_KNOBS:
            continue
        a, b = getattr(old, f.name), getattr(new, f.name)
        if a == b:
            continue
        arch = new_arch if f.name == "model" else old_arch
        try:
            p = plan_pool(arch, replace(old, **{f.name: b}))
        except InputError as e:
            out.append(KnobEffect(f.name, a, b, 0, 0, str(e)))
            continue
        out.append(KnobEffect(f.name, _show(a), _show(b), p.logged_tokens, p.cell.total_bytes, p.startup_error))
    if old_arch != new_arch and not any(e.knob == "model" for e in out):
        p = plan_pool(new_arch, old)
        out.append(KnobEffect("model", old_arch.name, new_arch.name, p.logged_tokens, p.cell.total_bytes, None))
    return tuple(out)


def _show(v: object) -> object:
    key = getattr(v, "key", None)
    return key if key is not None else v

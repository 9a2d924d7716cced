"""Is a request of ``ctx`` (+ ``gen``) tokens, N at a time, admitted by the pool? (pure)

The checks, in the order the engine applies them:
1. the engine starts at all (vLLM's max-model-len check; SGLang's "no memory for the KV cache");
2. context length: ctx <= context_len (SGLang --context-length, vLLM max_model_len); with --gen, the prompt and
   its output by the engine's own rule (kvplan.lengths);
3. pool: N × pages(ctx + gen) <= usable pages (SGLang: all pages; vLLM: num_blocks − 1 for the null block);
4. running requests: N <= max_running_requests (SGLang) / max_num_seqs (vLLM);
5. workspaces: req_to_token, CUDA graphs, indexer logits and top-k buffers fit in the room outside the pool
   at this batch and context (kvplan.plan.workspace).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan import limits
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import model_positions
from kvplan.engines.load_checks import load_refusal
from kvplan.errors import InputError
from kvplan.lengths import ContextLimit
from kvplan.models import mxfp4_moe
from kvplan.models.deploy import Deployment
from kvplan.plan.budget import Footprint, footprint
from kvplan.plan.context_remedy import context_remedies
from kvplan.plan.workspace import Workspace, WorkspaceQuery, workspace
from kvplan.search import largest_true, smallest_true


@dataclass(frozen=True, kw_only=True)
class Request:
    ctx_tokens: int
    gen_tokens: int = 0
    concurrent: int = 1

    def __post_init__(self) -> None:
        if self.ctx_tokens <= 0:
            raise InputError(f"--ctx must be positive, got {self.ctx_tokens}")
        if self.gen_tokens < 0:
            raise InputError(f"--gen must not be negative, got {self.gen_tokens}")
        if self.concurrent <= 0:
            raise InputError(f"--concurrent must be positive, got {self.concurrent}")

    @property
    def total_tokens(self) -> int:
        return self.ctx_tokens + self.gen_tokens

    def context_needed(self, plan: PoolPlan) -> int:
        """The context length the plan's engine needs to serve this request whole (not refused, output not cut)."""
        return ContextLimit(plan.engine, plan.context_len).needs(self.ctx_tokens, self.gen_tokens)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    need: int
    have: int
    unit: str
    detail: str = ""
    reserved: bool = False
    """``have`` is sized from ``need`` by the engine itself (vLLM's profile run reserves the workspaces it
    measured): the check fails only when that reservation leaves no KV cache, so it never names the tightest
    constraint of an admitted request."""

    @property
    def can_bind(self) -> bool:
        """A sized capacity the request can run short of: not the start check, not a reservation sized from
        the need (``reserved``: need == have by construction, 0 % headroom that is no margin at all)."""
        return bool(self.unit) and not self.reserved


@dataclass(frozen=True)
class Remedy:
    """A deployment change (``--set knob=value``, with ``also`` the knobs that go with it, e.g. ``tp=16`` with
    ``nodes=2``; each a knob the loader accepts) that admits the request as asked, verified by re-planning the
    changed deployment."""

    knob: str
    value: object
    pool_tokens: int
    """The engine's logged capacity after the change (scaled like the logged pool under --pool-tokens)."""
    detail: str
    also: tuple[tuple[str, object], ...] = ()
    """Knobs set together with ``knob`` (more nodes to hold a larger tp or ep)."""
    sizes: tuple[tuple[str, int], ...] = ()
    """Byte figures the detail names as ``{size:NAME}``; the render layer writes them in GiB and GB."""

    @property
    def sets(self) -> tuple[str, ...]:
        """The change as ``--set`` values: ``("tp=16", "nodes=2")``."""
        return tuple(
            f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in ((self.knob, self.value), *self.also)
        )

    @property
    def flags(self) -> str:
        """The change as it is typed: ``--set tp=16 --set nodes=2``."""
        return " ".join(f"--set {s}" for s in self.sets)


@dataclass(frozen=True)
class MainOnlyClaim:
    """What a plan that counted the main MLA KV only (no indexer) would have claimed."""

    cell_bytes: int
    pool_tokens: int
    largest_ctx: int
    admitted: bool


@dataclass(frozen=True, kw_only=True)
class Admission:
    plan: PoolPlan
    request: Request
    checks: tuple[Check, ...]
    need: Footprint
    usable_tokens: int
    largest_ctx: int
    max_concurrent: int
    remedies: tuple[Remedy, ...]
    main_only: MainOnlyClaim
    pool_source: str
    workspace: Workspace
    fewer_at_once: int | None = None
    """When N copies are asked and only fewer fit, how many do (``4`` of the 8): not a deployment change."""

    @property
    def tail_waste_tokens(self) -> int:
        """Slots of the last page this request allocates but never fills."""
        return self.need.pages * self.plan.logical_page_tokens - self.request.total_tokens

    @property
    def per_rank(self) -> int:
        """Requests one pool holds: the N copies spread over the DP-attention ranks (:func:`per_dp_rank`)."""
        return per_dp_rank(self.plan, self.request.concurrent)

    @property
    def tail_waste_bytes(self) -> int:
        """Those slots in bytes on one GPU, for the requests its pool holds (each rank holds 1/dcp of them)."""
        return self.tail_waste_tokens * self.per_rank * self.plan.cell.total_bytes // self.plan.dcp

    @property
    def admitted(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def binding(self) -> Check:
        """The failing check, or the tightest one when all pass (least headroom relative to need)."""
        for c in self.checks:
            if not c.ok:
                return c
        sized = [c for c in self.checks if c.can_bind] or [c for c in self.checks if c.unit]
        return min(sized, key=lambda c: (c.have - c.need) / max(c.have, 1))

    @property
    def over_context(self) -> bool:
        """The engine rejects the request for its length before it reaches the pool: none of it runs."""
        return self.request.context_needed(self.plan) > self.plan.context_len

    @property
    def headroom_tokens(self) -> int:
        """Pool tokens left after N such requests, in the pool of one DP rank (negative: short by that much)."""
        return self.usable_tokens - self.per_rank * self.need.pages * self.plan.logical_page_tokens


LOGGED_POOL = "log_pool_tokens"
PLANNED_POOL = "planned_pool_tokens"
"""extras keys of a plan whose pool came from a log: the logged and the planned pool, to scale remedies alike."""


def with_pool_tokens(plan: PoolPlan, tokens: int) -> PoolPlan:
    """The plan, with the pool an engine log reported (SGLang max_total_num_tokens; vLLM blocks × 64).

    The plan remembers both pools, so that remedies re-plan the deployment and scale the new pool the same
    way (logged / planned).
    """
    page = plan.logical_page_tokens
    pages = tokens // page
    usable = pages - 1 if plan.engine == "vllm" else pages
    planned = plan.extras.get(PLANNED_POOL, plan.logged_tokens if plan.startup_error is None else 0)
    return replace(
        plan,
        rows=pages * plan.page_tokens,
        usable_pages=max(usable, 0),
        logged_tokens=tokens,
        startup_error=None,
        extras={**plan.extras, LOGGED_POOL: tokens, PLANNED_POOL: planned},
    )


def dp_ranks(plan: PoolPlan) -> int:
    """Pools the deployment has for one model replica: each DP-attention rank schedules its own requests into
    its own pool (SGLang ``--enable-dp-attention --dp N``: ``max_running_requests // dp`` per rank; vLLM
    ``--data-parallel-size``: one engine core, scheduler and block pool per DP rank)."""
    return max(plan.deployment.dp_attention, 1)


def per_dp_rank(plan: PoolPlan, n: int) -> int:
    """Of ``n`` requests, the most one DP rank holds when they are spread evenly: ceil(n / dp).

    >>> from types import SimpleNamespace as NS
    >>> per_dp_rank(NS(deployment=NS(dp_attention=8)), 20)   # 20 over 8 ranks: 4 ranks hold 3
    3
    """
    return -(-n // dp_ranks(plan))


def largest_admitted(plan: PoolPlan) -> int:
    if plan.startup_error:
        return 0
    if not plan.pools:
        return min(plan.context_len, plan.usable_tokens)
    # a hybrid: the longest request every pool holds (each pool's need grows with the length, a window's and a
    # state's stop growing, so the fit is monotone and bisection finds its edge)
    fits = largest_true(1, plan.context_len, lambda t: all(p.need(t) <= p.capacity for p in plan.pools))
    return fits or 0


def largest_ctx_for(plan: PoolPlan, req: Request) -> int:
    """The longest ``--ctx`` admitted alone with the request's ``--gen``: the pool holds ctx + gen, and the
    engine's length rule takes it."""
    return _ctx_within(plan, req, largest_admitted(plan), plan.logged_tokens)


def _ctx_within(plan: PoolPlan, req: Request, window: int, pool_tokens: int) -> int:
    """The longest ``--ctx`` within ``window`` tokens the pool holds that the engine's length rule takes."""
    if req.gen_tokens == 0 or window <= 0:
        return window
    cap = plan.context_len
    if plan.engine == "sglang" and not plan.pools:  # max_req_len = min(context_len, max_total_num_tokens) - 1
        cap = min(cap, pool_tokens)
    return max(0, min(window - req.gen_tokens, ContextLimit(plan.engine, cap).longest(req.gen_tokens)))


def pools_hold(plan: PoolPlan, n: int, tokens: int) -> bool:
    """Whether ``n`` requests of ``tokens`` fit in every pool of the plan (per DP rank), the engine started."""
    k = per_dp_rank(plan, n)
    return plan.startup_error is None and all(k * p.need(tokens) <= p.capacity for p in plan.hybrid_pools)


def _pool_checks(plan: PoolPlan, k: int, total: int, spread: str) -> list[Check]:
    """One check per pool of a hybrid plan: k requests × what one takes (the sum of its kinds' demands)."""
    out = []
    for pool in plan.pools:
        need = pool.need(total)
        parts = " + ".join(f"{d.need(total, pool.page_tokens):,} {d.kind}" for d in pool.demands)
        out.append(
            Check(
                f"pool: {pool.name}",
                k * need <= pool.capacity,
                k * need,
                pool.capacity,
                f"{pool.unit}s",
                f"{k} × {need:,} {pool.unit}s ({parts}){spread}",
            )
        )
    return out


def _checks(plan: PoolPlan, req: Request, ws: Workspace) -> tuple[Check, ...]:
    total = req.total_tokens
    pages = plan.pages_for(total)
    k, dp = per_dp_rank(plan, req.concurrent), dp_ranks(plan)
    spread = f" ({req.concurrent} requests over {dp} DP-attention ranks, a pool each)" if dp > 1 else ""
    checks = [
        Check(
            "engine starts",
            plan.startup_error is None,
            0,
            0,
            "",
            plan.startup_error or f"{plan.semantics} builds the pool",
        ),
        Check(
            "context length",
            (needed := req.context_needed(plan)) <= plan.context_len,
            needed,
            plan.context_len,
            "tokens",
            _context_detail(plan, req),
        ),
        *(
            _pool_checks(plan, k, total, spread)
            if plan.pools
            else [
                Check(
                    "pool pages",
                    k * pages <= plan.usable_pages,
                    k * pages,
                    plan.usable_pages,
                    "pages",
                    f"{k} × {pages:,} pages of {plan.logical_page_tokens} tokens{spread}",
                )
            ]
        ),
        Check(
            "running requests",
            k <= plan.max_running_requests,
            k,
            plan.max_running_requests,
            "requests",
            ("max_running_requests" if plan.engine == "sglang" else "max_num_seqs")
            + (" per DP rank" if dp > 1 else ""),
        ),
        Check(
            "workspace",
            ws.fits or plan.startup_error is not None,
            ws.peak_bytes,
            ws.room_bytes,
            "bytes",
            _workspace_what(plan),
            reserved=plan.engine == "vllm",
        ),
    ]
    return tuple(checks)


def _context_detail(plan: PoolPlan, req: Request) -> str:
    limit = ContextLimit(plan.engine, plan.context_len)
    if req.gen_tokens == 0:
        return limit.rule(0)
    longest = limit.longest(req.gen_tokens)
    return f"{limit.rule(req.gen_tokens)}; the longest --ctx served with --gen {req.gen_tokens}: {longest:,}"


def _workspace_what(plan: PoolPlan) -> str:
    """What the workspace check counts: the DSA indexer's logits and top-k only where the model has an indexer."""
    if plan.engine == "sglang":
        return (
            "req_to_token, CUDA graphs"
            + (", indexer logits, top-k" if plan.arch.has_indexer else "")
            + (" outside the pool")
        )
    if plan.arch.has_indexer:
        return "DSA buffers counted in vLLM's non-KV profile, logits capped at 512 MiB"
    return "block table, counted in vLLM's non-KV profile"


def _main_only(plan: PoolPlan, req: Request) -> MainOnlyClaim:
    cell = plan.cell.main_only_bytes
    page = plan.page_tokens
    rows = plan.available_bytes // cell // page * page if cell else 0
    pages = rows // page - (1 if plan.engine == "vllm" else 0)
    usable = max(pages, 0) * plan.logical_page_tokens
    largest = min(plan.context_len, usable) if not plan.startup_error else 0
    fits = per_dp_rank(plan, req.concurrent) * plan.pages_for(req.total_tokens) <= max(pages, 0)
    return MainOnlyClaim(
        cell_bytes=cell,
        pool_tokens=rows * plan.dcp,
        largest_ctx=_ctx_within(plan, req, largest, rows * plan.dcp),
        admitted=fits and req.context_needed(plan) <= plan.context_len,
    )


def admit(plan: PoolPlan, req: Request, *, pool_source: str = "planned", remedies: bool = True) -> Admission:
    need = footprint(plan, req.total_tokens)
    ws = workspace(plan, WorkspaceQuery(batch=per_dp_rank(plan, req.concurrent), ctx=req.total_tokens))
    checks = _checks(plan, req, ws)
    fit = min(p.fits(req.total_tokens) for p in plan.hybrid_pools) if not plan.startup_error else 0
    # over the context length the engine rejects every copy (tokenizer_manager / input_processor), whatever fits
    at_once = 0 if req.context_needed(plan) > plan.context_len else min(fit, plan.max_running_requests) * dp_ranks(plan)
    result = Admission(
        plan=plan,
        request=req,
        checks=checks,
        need=need,
        usable_tokens=plan.usable_tokens if not plan.startup_error else 0,
        largest_ctx=largest_ctx_for(plan, req),
        max_concurrent=at_once,
        remedies=(),
        main_only=_main_only(plan, req),
        pool_source=pool_source,
        workspace=ws,
        fewer_at_once=at_once if 1 <= at_once < req.concurrent else None,
    )
    if remedies and not result.admitted:
        result = replace(result, remedies=tuple(find_remedies(plan, req)))
    return result


# --------------------------------------------------------------------------- remedies


def _replan(plan: PoolPlan, **changes: object) -> PoolPlan | None:
    """The deployment re-planned with the changes (None if the engine refuses them at startup).

    Under --pool-tokens (a pool from a log), the new pool is scaled like the logged one: new planned pool ×
    logged / planned, rounded down to the page. The scaled plan keeps the re-planned startup error: the log proves
    nothing about the changed deployment.
    """
    dep: Deployment = replace(plan.deployment, **changes)  # type: ignore[arg-type]
    try:
        new = plan_pool(plan.arch, dep)
    except InputError:
        return None
    if LOGGED_POOL not in plan.extras:
        return new
    logged, planned = plan.extras[LOGGED_POOL], plan.extras[PLANNED_POOL]
    if new.startup_error is not None or planned <= 0:
        return None
    page = new.logical_page_tokens
    return with_pool_tokens(new, new.logged_tokens * logged // planned // page * page)


def _try(plan: PoolPlan, req: Request, **changes: object) -> PoolPlan | None:
    """Re-plan with the changes; the new plan if it admits the request."""
    new = _replan(plan, **changes)
    if new is None:
        return None
    return new if admit(new, req, remedies=False).admitted else None


def _pool_fits(plan: PoolPlan, req: Request, **changes: object) -> bool:
    """Whether the re-planned pool alone (pages, engine start) holds the request."""
    new = _replan(plan, **changes)
    if new is None:
        return False
    return pools_hold(new, req.concurrent, req.total_tokens)


def _scaled(plan: PoolPlan) -> str:
    """How remedies relate to a logged pool, for their detail text."""
    if LOGGED_POOL not in plan.extras:
        return ""
    return f"; pool scaled by logged / planned = {plan.extras[LOGGED_POOL]:,} / {plan.extras[PLANNED_POOL]:,}"


def find_remedies(plan: PoolPlan, req: Request) -> list[Remedy]:
    """Deployment changes that admit the request as asked (N copies of ctx + gen), each re-planned.

    Every remedy is a ``--set knob=value`` of a knob the deployment loader accepts (with the nodes a larger
    layout needs); "fewer at once" is not one of them (it is ``Admission.fewer_at_once``). Under --pool-tokens,
    plans are scaled like the log. When no change on the same GPUs admits the request, more GPUs are proposed
    (:func:`_more_gpus`).
    """
    dep = plan.deployment
    if LOGGED_POOL in plan.extras and plan.extras[PLANNED_POOL] <= 0:
        return []  # the planned deployment builds no pool: a logged pool cannot be scaled from it
    out: list[Remedy] = []
    total = req.total_tokens
    how = _scaled(plan)
    if load_refusal(plan.arch, dep) is not None:  # nothing but the layout helps a model the engine cannot build
        return _load_remedies(plan, req, how) or _more_gpus(plan, req, how)

    # a dcp size: the smallest divisor of tp above the current one
    for d in range(dep.dcp + 1, dep.tp + 1):
        if dep.tp % d == 0 and (new := _try(plan, req, dcp=d)) is not None:
            out.append(
                Remedy("dcp", d, new.logged_tokens, f"{new.kv_format} rows, cell {new.cell.total_bytes:,} B{how}")
            )
            break

    if (mem := memory_remedy(plan, req)) is not None:
        out.append(mem)

    # the kv cache dtype (an explicit mla_layout would pin the row, so only the dtype is changed, as --set does)
    if plan.kv_format in ("bf16", "fp16"):
        dtype = "fp8_e4m3" if plan.engine == "sglang" else "fp8"
        if (new := _try(plan, req, kv_cache_dtype=dtype)) is not None:
            out.append(Remedy("kv_cache_dtype", dtype, new.logged_tokens, f"{new.kv_format} rows{how}"))

    # the context length: lower (vLLM refuses to start) or raise it to the request (up to the model's)
    window = req.context_needed(plan)
    if plan.startup_error and plan.engine == "vllm":
        new = _try(plan, req, context_length=window)
        if new is not None:
            out.append(
                Remedy("context_length", window, new.logged_tokens, f"max_model_len the pool can start with{how}")
            )
    elif plan.context_len < window <= model_positions(plan) and (new := _try(plan, req, context_length=window)):
        out.append(Remedy("context_length", window, new.logged_tokens, f"up to max_position_embeddings{how}"))
    # past max_position_embeddings: the card's RoPE scaling, else the engine's env var (kvplan.plan.context_remedy)
    for c in context_remedies(plan, window, lambda **changes: _try(plan, req, **changes)):
        (knob, value), *also = c.sets
        out.append(Remedy(knob, value, c.plan.logged_tokens, c.detail + how, tuple(also)))

    # more running requests (the N copies must run at once) or fewer (SGLang: a smaller req_to_token table)
    failed = {c.name for c in admit(plan, req, remedies=False).checks if not c.ok}
    if "running requests" in failed and (new := _try(plan, req, max_running_requests=req.concurrent)) is not None:
        out.append(Remedy("max_running_requests", req.concurrent, new.logged_tokens, f"{req.concurrent} at once{how}"))
    if plan.engine == "sglang" and "workspace" in failed:
        cur = plan.max_running_requests
        best_mrr = largest_true(req.concurrent, cur - 1, lambda m: _try(plan, req, max_running_requests=m) is not None)
        if best_mrr is not None:
            new = _try(plan, req, max_running_requests=best_mrr)
            assert new is not None
            out.append(
                Remedy(
                    "max_running_requests",
                    best_mrr,
                    new.logged_tokens,
                    "req_to_token {size:after} instead of {size:before}" + how,
                    sizes=(
                        ("after", new.extras["req_to_token_bytes"]),
                        ("before", plan.extras["req_to_token_bytes"]),
                    ),
                )
            )
    # DP attention: N copies spread over more pools (MLA keeps the whole latent on every rank, so each DP rank's
    # pool is as large as the TP pool was); offered when one copy fits and the N copies do not
    one_fits = pools_hold(plan, 1, total)
    crowded = failed & {"pool pages", "running requests", "workspace"} or any(f.startswith("pool: ") for f in failed)
    if plan.arch.is_mla and one_fits and crowded:
        for d in range(dep.dp_attention + 1, dep.tp + 1):
            if dep.tp % d == 0 and (new := _try(plan, req, dp_attention=d)) is not None:
                k = per_dp_rank(new, req.concurrent)
                detail = (
                    f"{d} pools of {new.logged_tokens:,} tokens, at most {k} of the {req.concurrent} requests each{how}"
                )
                out.append(Remedy("dp_attention", d, new.logged_tokens, detail))
                break
    if not out:
        out += _context_first(plan, req) or _more_gpus(plan, req, how)
    return out


def _context_first(plan: PoolPlan, req: Request) -> list[Remedy]:
    """A request over the context length that the pool cannot hold either: the context change first, then each
    remedy of the re-planned deployment, with the context knobs carried along."""
    window = req.context_needed(plan)
    if window <= plan.context_len:
        return []
    if window <= model_positions(plan):
        sets: tuple[tuple[str, object], ...] = (("context_length", window),)
        why = f"context_length {window:,}, up to max_position_embeddings"
    else:
        changes = context_remedies(plan, window, lambda **ch: _replan(plan, **ch))
        if not changes:
            return []
        sets, why = changes[0].sets, changes[0].detail
    new = _replan(plan, **dict(sets))
    if new is None or admit(new, req, remedies=False).admitted:
        return []  # the context change alone is a remedy of its own
    return [replace(r, also=(*r.also, *sets), detail=f"{r.detail}; with {why}") for r in find_remedies(new, req)]


def _try_layout(plan: PoolPlan, req: Request, **changes: object) -> tuple[PoolPlan | None, dict[str, object]]:
    """Re-plan a layout change; on vLLM, with max_model_len cut to the request if the pool needs it to start."""
    new = _try(plan, req, **changes)
    window = req.context_needed(plan)
    if new is None and plan.engine == "vllm" and window < plan.context_len:
        changes = {**changes, "context_length": window}
        new = _try(plan, req, **changes)
    return new, changes


def _load_remedies(plan: PoolPlan, req: Request, how: str) -> list[Remedy]:
    """Layouts the engine builds the model at (kvplan.engines.load_checks), each re-planned and admitting: whole
    experts where the refusal is the experts' split (SGLang the smallest other ep dividing tp that loads; vLLM
    ``--enable-expert-parallel``, EP over all tp ranks: ep = tp), then the largest smaller tp that loads (dp
    attention and dcp still dividing it). A larger tp is :func:`_more_gpus`'s."""
    dep = plan.deployment
    refused = load_refusal(plan.arch, dep)
    assert refused is not None
    out: list[Remedy] = []
    if refused.experts:
        eps = (dep.tp,) if dep.engine == "vllm" else tuple(e for e in range(2, dep.tp + 1) if dep.tp % e == 0)
        for e in (e for e in eps if e != dep.ep):
            new, changes = _try_layout(plan, req, ep=e)
            if new is not None:
                also = tuple((k, v) for k, v in changes.items() if k != "ep")
                moe_tp = 1 if dep.engine == "vllm" else dep.tp // e
                width = plan.arch.shards.expert_intermediate // moe_tp if plan.arch.shards else 0
                split = "whole experts" if moe_tp == 1 else f"experts split {moe_tp} ways"
                detail = f"{split} ({width} wide a rank) over ep {e}; {new.kv_format} rows{how}"
                out.append(Remedy("ep", e, new.logged_tokens, detail, also))
                break
    for t in range(dep.tp - 1, 0, -1):
        if dep.tp % t or t % max(dep.dp_attention, 1) or t % dep.dcp or (dep.engine == "sglang" and dep.ep > t):
            continue
        new, changes = _try_layout(plan, req, tp=t)
        if new is None:
            continue
        w = new.knob("weights_per_gpu")
        also = tuple((k, v) for k, v in changes.items() if k != "tp")
        detail = f"{t * dep.pp} GPUs: weights {{size:weights}} a GPU; {new.kv_format} rows{how}"
        out.append(Remedy("tp", t, new.logged_tokens, detail, also, sizes=(("weights", w.as_int()),)))
        break
    return out


def memory_remedy(plan: PoolPlan, req: Request) -> Remedy | None:
    """The memory knob (SGLang mem_fraction_static, vLLM gpu_memory_utilization), searched in the engine's own
    steps: the smallest value that makes the pool big enough (monotone), then checked whole, since a larger
    fraction also shrinks the room for the workspaces. None when no value up to the engine's top one admits."""
    knob, steps, top = (
        ("mem_fraction_static", 1000, 950) if plan.engine == "sglang" else ("gpu_memory_utilization", 100, 98)
    )
    if plan.engine != "sglang" and plan.deployment.kv_cache_memory is not None:
        return None
    cur = round(plan.knob(knob).as_float() * steps)
    best = smallest_true(cur + 1, top, lambda m: _pool_fits(plan, req, **{knob: m / steps}))
    if best is None or (new := _try(plan, req, **{knob: best / steps})) is None:
        return None
    room = new.extras.get("slack_bytes")
    detail = "leaves {size:slack} of slack outside the pool" if room is not None else "higher utilization"
    sizes = (("slack", room),) if room is not None else ()
    return Remedy(knob, best / steps, new.logged_tokens, detail + _scaled(plan), sizes=sizes)


_DOUBLINGS = 6
"""How far :func:`_more_gpus` widens a layout: 2×, 4×, ... 64× its tp (a remedy, not a cluster design)."""


def _nodes_for(dep: Deployment, tp: int) -> int:
    """Nodes that hold a layout of max(tp, ep) × pp ranks (the loader's one GPU-count rule,
    kvplan.models.deployment._check_gpu_count), never fewer than the deployment has."""
    return max(dep.nodes, -(-max(tp, dep.ep) * dep.pp // dep.gpus_per_node))


def _estimate_check(new: PoolPlan) -> str:
    """Where a wider layout's weights are the estimate and the model has a measured point at another split, how
    far the estimate was off there (GLM-5.3 at TP8 on SGLang: measured 94.46 GiB, estimated 89.08 GiB): check the new
    layout's real weights before relying on its pool."""
    arch, dep = new.arch, new.deployment
    if not new.knob("weights_per_gpu").origin.startswith("default: estimated") or not arch.measured_weights:
        return ""
    point = arch.measured_weights[0]
    backend = mxfp4_moe.backend_for(dep.engine, dep.gpu)
    est = arch.estimated_weights_per_gpu(point.split, with_mtp=dep.mtp, engine=dep.engine, moe_backend=backend)
    return f"; at {point.split} measured {point.bytes:,} B, estimated {est:,} B"  # exact bytes: the gap is small


def _more_gpus(plan: PoolPlan, req: Request, how: str) -> list[Remedy]:
    """The smallest larger tp that admits the request, re-planned: attention and experts split more ways
    (dp attention and dcp still divide it), with ``nodes`` when its ranks need more than the deployment's nodes.

    On vLLM a smaller pool must still start with max_model_len: where the wider layout admits the request only
    with a context length cut to the request, that goes with it (``--set tp=16 --set nodes=2 --set
    context_length=131072``). Larger ``ep`` is not proposed: SGLang splits experts inside the TP group
    (``ep`` divides tp) and vLLM has no ep knob (EP = TP × DP). Neither is dp attention: it replicates the
    attention weights and gives each rank its own pool, so one request gets no more room.

    The weights per GPU follow the new split (a measured point of that split, else the estimate); a
    ``weights_per_gpu`` the user set stays as set, so no layout changes it.
    """
    dep = plan.deployment
    window = req.context_needed(plan)
    for i in range(1, _DOUBLINGS + 1):
        tp = dep.tp << i
        nodes = _nodes_for(dep, tp)
        if tp * dep.pp > limits.MAX_GPUS or nodes * dep.gpus_per_node > limits.MAX_GPUS:
            break
        also: tuple[tuple[str, object], ...] = (("nodes", nodes),) if nodes != dep.nodes else ()
        new = _try(plan, req, tp=tp, **dict(also))
        if new is None and plan.engine == "vllm" and window < plan.context_len:
            also = (*also, ("context_length", window))
            new = _try(plan, req, tp=tp, **dict(also))
        if new is None:
            continue
        w = new.knob("weights_per_gpu")
        source = "as set" if not w.defaulted else w.origin.removeprefix("default: ").split(" ", 1)[0]
        where = f"{tp * dep.pp} GPUs on {nodes} node(s) of {dep.gpus_per_node}"
        detail = f"{where}: weights {{size:weights}} a GPU ({source}{_estimate_check(new)}); {new.kv_format} rows{how}"
        return [Remedy("tp", tp, new.logged_tokens, detail, also, sizes=(("weights", w.as_int()),))]
    return []

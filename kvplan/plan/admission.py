"""What ``kvplan admit`` answers with (the request, each check, a remedy, the verdict), the pools' arithmetic and
the checks themselves, in the engine's order (``kvplan.plan.admit``); the remedies are ``kvplan.plan.remedies``."""

from __future__ import annotations

from dataclasses import replace

from kvplan import record
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.lengths import ContextLimit
from kvplan.plan.budget import Footprint, footprint
from kvplan.plan.workspace import Workspace, WorkspaceQuery, workspace
from kvplan.search import largest_true


@record(kw_only=True)
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


@record
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


@record
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


@record
class MainOnlyClaim:
    """What a plan that counted the main MLA KV only (no indexer) would have claimed."""

    cell_bytes: int
    pool_tokens: int
    largest_ctx: int
    admitted: bool


@record(kw_only=True)
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
    if plan.engine == "sglang":  # max_req_len = min(context_len, max_total_num_tokens) - 1, hybrids included
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


def assess(plan: PoolPlan, req: Request, *, pool_source: str = "planned") -> Admission:
    """The verdict with every check, without remedies (:func:`kvplan.plan.admit.admit` adds them)."""
    need = footprint(plan, req.total_tokens)
    ws = workspace(plan, WorkspaceQuery(batch=per_dp_rank(plan, req.concurrent), ctx=req.total_tokens))
    checks = _checks(plan, req, ws)
    fit = min(p.fits(req.total_tokens) for p in plan.hybrid_pools) if not plan.startup_error else 0
    # over the context length the engine rejects every copy (tokenizer_manager / input_processor), whatever fits
    at_once = 0 if req.context_needed(plan) > plan.context_len else min(fit, plan.max_running_requests) * dp_ranks(plan)
    return Admission(
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

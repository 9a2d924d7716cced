"""Deployment changes that admit a rejected request (dcp, the memory knob, the kv dtype, the context length,
running requests, DP attention, a layout the engine loads, more GPUs), each re-planned and checked whole."""

from __future__ import annotations

from dataclasses import replace

from kvplan import limits
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import model_positions
from kvplan.engines.load_checks import load_refusal
from kvplan.errors import InputError
from kvplan.models import mxfp4_moe
from kvplan.models.deploy import Deployment
from kvplan.plan.admission import (
    LOGGED_POOL,
    PLANNED_POOL,
    Remedy,
    Request,
    assess,
    per_dp_rank,
    pools_hold,
    with_pool_tokens,
)
from kvplan.plan.context_remedy import context_remedies
from kvplan.search import largest_true, smallest_true


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
    return new if assess(new, req).admitted else None


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

    failed = {c.name for c in assess(plan, req).checks if not c.ok}
    if (mem := memory_remedy(plan, req) or _lower_memory_remedy(plan, req, failed)) is not None:
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

    out += _running_remedies(plan, req, failed, how)
    out += _dp_remedies(plan, req, failed, how)
    if not out:
        out += _context_first(plan, req) or _more_gpus(plan, req, how)
    return out


def _running_remedies(plan: PoolPlan, req: Request, failed: set[str], how: str) -> list[Remedy]:
    """More running requests (the N copies must run at once) or fewer (SGLang: a smaller req_to_token table)."""
    out: list[Remedy] = []
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
    return out


def _dp_remedies(plan: PoolPlan, req: Request, failed: set[str], how: str) -> list[Remedy]:
    """DP attention: N copies spread over more pools (MLA keeps the whole latent on every rank, so each DP rank's
    pool is as large as the TP pool was); offered when one copy fits and the N copies do not."""
    dep = plan.deployment
    one_fits = pools_hold(plan, 1, req.total_tokens)
    crowded = failed & {"pool pages", "running requests", "workspace"} or any(f.startswith("pool: ") for f in failed)
    if plan.arch.is_mla and one_fits and crowded:
        for d in range(dep.dp_attention + 1, dep.tp + 1):
            if dep.tp % d == 0 and (new := _try(plan, req, dp_attention=d)) is not None:
                k = per_dp_rank(new, req.concurrent)
                detail = (
                    f"{d} pools of {new.logged_tokens:,} tokens, at most {k} of the {req.concurrent} requests each{how}"
                )
                return [Remedy("dp_attention", d, new.logged_tokens, detail)]
    return []


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
    if new is None or assess(new, req).admitted:
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


def _lower_memory_remedy(plan: PoolPlan, req: Request, failed: set[str]) -> Remedy | None:
    """SGLang's workspaces live in the slack outside mem_fraction_static: where only they fail, the largest lower
    fraction whose slack holds them and whose pool still holds the request, checked whole. SGLang's own advice for
    an OOM outside the pool: "decrease --mem-fraction-static" (docs, hyperparameter_tuning.md)."""
    if plan.engine != "sglang" or failed != {"workspace"}:
        return None
    cur = round(plan.knob("mem_fraction_static").as_float() * 1000)

    def workspace_fits(m: int) -> bool:
        new = _replan(plan, mem_fraction_static=m / 1000)
        return new is not None and all(c.ok for c in assess(new, req).checks if c.name == "workspace")

    # the pool shrinks and the slack grows as the fraction falls: between the two bounds, if they cross
    low = smallest_true(1, cur - 1, lambda m: _pool_fits(plan, req, mem_fraction_static=m / 1000))
    best = None if low is None else largest_true(low, cur - 1, workspace_fits)
    if best is None or (new := _try(plan, req, mem_fraction_static=best / 1000)) is None:
        return None
    sizes = (("slack", new.extras["slack_bytes"]),)
    detail = "leaves {size:slack} for the workspaces" + _scaled(plan)
    return Remedy("mem_fraction_static", best / 1000, new.logged_tokens, detail, sizes=sizes)


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

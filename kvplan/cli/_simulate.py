"""simulate's steps: the replay's unit and pool, the service and the window, the replay, what its report says."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kvplan.errors import InputError
from kvplan.lengths import ContextLimit
from kvplan.render.sim_report import SimSetting
from kvplan.sim import published as pub
from kvplan.sim.run import (
    CapacityScale,
    SimConfig,
    make_window,
    parse_capacity,
    parse_sweep,
    run_one,
    run_sweep,
    semantics_text,
)
from kvplan.sim.service import Service
from kvplan.sim.trace import Trace

if TYPE_CHECKING:  # a replay without a deployment loads no engine (tests/cli/test_lazy_commands.py)
    from kvplan.engines.common import PoolPlan


class Progress(Protocol):
    """A progress bar's factory (label, total) -> the bar: called with the requests done, closed at the end."""

    def __call__(self, label: str, total: Callable[[], int | None]) -> Any: ...


@dataclass(frozen=True)
class SimOptions:
    """simulate's options as typed (the steps below read them by name)."""

    trace: Path
    trace_format: str | None
    skip_bad: bool
    block_size: int | None
    semantics: str | None
    policy: str
    capacity: str | None
    sweep: str | None
    points: int
    window: str
    occupancy: bool
    prefill_tps: int
    tpot_ms: float
    max_running: int | None
    eagle: bool
    page_tokens: int | None
    jobs: int | None
    plot: Path | None
    check: bool
    model: str | None
    deploy: str | None
    set_: list[str] | None


def run_simulate(
    o: SimOptions, tr: Trace, plan: PoolPlan | None, sem: str, hybrid_note: str, bar: Progress
) -> tuple[Any, SimSetting]:
    """The replay of ``tr`` under ``sem`` (on ``plan``'s pool where one is named) and what the report says of it;
    ``hybrid_note``: what the replay of a hybrid's pool approximates ("" for a uniform pool)."""
    unit, unit_tokens = _unit(o, sem, tr, plan)
    paging_text = f"none: the trace's own {unit_tokens}-token blocks"
    if sem != "ideal":
        from kvplan.sim.paging import Paging  # an ideal replay loads no engine code

        paging_text = Paging(tr.block_tokens, unit_tokens).describe()
    scale = CapacityScale(unit_tokens, unit)
    if plan is not None:
        scale = CapacityScale(unit_tokens, unit, plan.cell.total_bytes, plan.dcp)
    win = make_window(tr, o.window)
    cap, cap_text = _capacity(o, sem, plan, scale, unit, unit_tokens, hybrid_note)
    service = Service()
    if o.occupancy:
        limit = o.max_running if o.max_running is not None else (plan.max_running_requests if plan else None)
        service = Service(o.prefill_tps, max(1, round(o.tpot_ms * 1000)), limit)
    # a named deployment's engine rejects requests over its context length (kvplan.sim.context)
    named = plan is not None and (o.deploy is not None or o.model is not None or bool(o.set_))
    context = ContextLimit(plan.engine, plan.context_len) if named and plan is not None else None
    cfg = SimConfig(tr, sem, o.policy, win, unit_tokens, cap, o.occupancy, service, o.eagle, o.check, context)
    published: tuple[tuple[int, int], ...] = ()
    kind = pub.mooncake_trace_kind(tr.path) if tr.format == "mooncake" else None
    if kind is not None and win.start == 0:
        # Figure 9 measures the whole trace: a last-50 % curve is not comparable with it
        published = tuple(pub.fig9_points(kind))
    result = _replay(o, cfg, scale, unit, unit_tokens, bar)
    if result.bad_records:
        sys.stderr.write(f"kvplan: warning: skipped {result.bad_records:,} malformed record(s) (--skip-bad)\n")
    version = plan.engine_version if plan is not None and sem != "ideal" else ""
    setting = SimSetting(
        trace_path=str(o.trace),
        trace_format=tr.format,
        trace_text=tr.describe(),
        block_tokens=tr.block_tokens,
        bad_records=result.bad_records,
        semantics_text=semantics_text(cfg, version),
        paging_text=paging_text,
        capacity_text=cap_text,
        window_text=_window_text(result.requests + result.refused.requests, win.start),
        measurement_text=_measured_text(sem, o.occupancy, unit),
        service_text=service.describe() if o.occupancy else "",
        deployment=plan.deployment.name if plan is not None else "",
        bytes_per_unit=(plan.cell.total_bytes * unit_tokens // plan.dcp) if plan is not None else 0,
        published=published,
        published_label="Mooncake FAST'25 Fig. 9" if published else "",
        startup_error=plan.startup_error if plan is not None else None,
        carry=plan.deployment.carry if plan is not None else None,
        context_text=context.describe() if context is not None else "",
    )
    return result, setting


def _unit(o: SimOptions, sem: str, tr: Trace, plan: PoolPlan | None) -> tuple[str, int]:
    """The replay's unit: the trace's own blocks (ideal) or the engine's pages; the options each semantics takes."""
    if sem == "ideal":
        if not tr.has_blocks:
            raise InputError("ideal semantics needs block ids and this trace has none: use --semantics sglang|vllm")
        if o.policy not in ("lru", "fifo"):
            raise InputError(f"--policy {o.policy!r}: ideal semantics has lru (leaf-LRU) and fifo")
        if o.occupancy:
            raise InputError("--occupancy needs an engine's pool: --semantics sglang or vllm")
        if o.eagle or o.page_tokens:
            raise InputError("--eagle and --page-tokens apply to engine semantics (sglang, vllm)")
        return "block", tr.block_tokens
    assert plan is not None
    from kvplan.sim.radix import POLICIES

    if sem == "vllm" and o.policy != "lru":
        raise InputError("--policy: vLLM's free queue has one order (LRU); only --policy lru applies")
    if sem == "sglang" and o.policy not in POLICIES:
        raise InputError(f"--policy {o.policy!r}: SGLang offers {', '.join(POLICIES)}")
    return "page", o.page_tokens or plan.logical_page_tokens


def _capacity(
    o: SimOptions, sem: str, plan: PoolPlan | None, scale: CapacityScale, unit: str, unit_tokens: int, hybrid_note: str
) -> tuple[int | None, str]:
    """The pool in units (None: unbounded) and the words that say where it came from."""
    if o.capacity is not None:
        cap = parse_capacity(o.capacity, scale)
        cap_text = f"--capacity {o.capacity}"
        if cap is not None and scale.bytes_per_token_num and unit == "page":
            cap_text += f" (a page takes {plan.cell.total_bytes * plan.page_tokens:,} B per GPU)" if plan else ""
    elif plan is not None and (sem != "ideal" or o.deploy is not None):
        cap = plan.usable_tokens // unit_tokens
        cap_text = (
            f"the planned pool of {plan.deployment.name} ({plan.semantics}): {plan.usable_tokens:,} usable tokens"
            + (" (the null block excluded)" if plan.engine == "vllm" else "")
        )
    else:
        cap, cap_text = None, "unbounded"
    if o.sweep is not None and o.capacity is None:
        cap_text = "swept (below)"
    if hybrid_note:  # a hybrid: say what the replay approximates
        cap_text += f"; {hybrid_note}"
    if cap is None and sem != "ideal" and not o.sweep:
        raise InputError("engine pools are finite: give --capacity (tokens, pages or bytes) or --deploy")
    if o.capacity is None and cap == 0 and plan is not None and plan.startup_error and not o.sweep:
        raise InputError(
            f"{plan.deployment.name}: the engine would not start ({plan.startup_error}), so it has no pool; "
            "give --capacity to replay a pool of your own"
        )
    if cap is not None and cap <= 0 and not o.sweep:
        raise InputError(f"--capacity {o.capacity}: less than one {unit} of {unit_tokens} tokens")
    return cap, cap_text


def _replay(o: SimOptions, cfg: SimConfig, scale: CapacityScale, unit: str, unit_tokens: int, bar: Progress) -> Any:
    """One pool replayed, or a sweep of capacities (one pass for ideal semantics), with a progress bar."""
    tr = cfg.trace
    if o.sweep is None:
        if o.plot is not None and not o.occupancy:
            raise InputError("--plot draws a curve (--sweep) or an occupancy timeline (--occupancy)")
        one = bar("replaying", tr.count)
        try:
            return run_one(cfg, progress=one)
        finally:
            one.close()
    if o.occupancy:
        raise InputError("--sweep replays order mode; drop --occupancy (or run one pool with --capacity)")
    if o.sweep.strip().lower() == "fig9":
        caps = sorted({c // unit_tokens for c in pub.FIG9_CAPACITIES})
    else:
        caps = parse_sweep(o.sweep, scale, o.points)
    if min(caps) <= 0:
        raise InputError(f"--sweep {o.sweep}: a capacity below one {unit} of {unit_tokens} tokens")
    swept = bar("replaying", tr.count if cfg.semantics == "ideal" else lambda: len(caps))
    try:
        return run_sweep(cfg, caps, jobs=o.jobs or 0, progress=swept)
    finally:
        swept.close()


def _window_text(n: int, start: int) -> str:
    """The requests measured; ``n`` counts trace positions (the rejected keep theirs)."""
    if start:
        return (
            f"last 50%: requests {start:,}–{max(n - 1, 0):,} are measured, the first {start:,} "
            "only warm the cache (kvcache.ai's convention)"
        )
    return f"all {n:,} requests"


def _measured_text(sem: str, occupancy: bool, unit: str) -> str:
    denominator = (
        "the tokens its blocks cover (kvcache.ai's block-weighted tokens)" if sem == "ideal" else "its input tokens"
    )
    if occupancy:
        return (
            "requests arrive at their trace times and hold their pages while they run; a request's hit is "
            f"its cached prefix at first admission, over {denominator}"
        )
    return (
        f"order mode: requests in trace order, one at a time; a request's hit is the longest run of its "
        f"leading {unit}s cached before it runs, over {denominator}; its KV is cached after it"
    )

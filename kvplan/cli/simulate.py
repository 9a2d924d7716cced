from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.render import OutputFormat, emit

_ENGINE_PRESETS = {"sglang": "glm-5.3-8xh200-sglang", "vllm": "glm-5.3-8xh200-vllm"}


class _Bar:
    """A rich progress bar on stderr, only when stderr is a terminal and the run has taken over a second."""

    def __init__(self, label: str, total: Callable[[], int | None]) -> None:
        self.label = label
        self.total = total
        """Called once, when the bar first shows (counting a trace's requests costs a read)."""
        self.t0 = time.monotonic()
        self.enabled = sys.stderr.isatty()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.monotonic() - self.t0 < 1.0:
                return
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total())
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _check_numbers(
    points: int, prefill_tps: int, tpot_ms: float, max_running: int | None, page_tokens: int | None, jobs: int | None
) -> None:
    """The numeric options in range before any work: no hang (a running limit below 1), no huge loop."""
    from kvplan import limits

    limits.bounded_int(points, name="--points", low=2, high=limits.MAX_LOOP)
    limits.bounded_int(prefill_tps, name="--prefill-tps", low=1, high=limits.MAX_TOKENS)
    limits.finite(tpot_ms, name="--tpot-ms")
    if not 0 < tpot_ms <= limits.MAX_TRACE_SECONDS:
        raise limits.LimitError(f"--tpot-ms: {tpot_ms!r} must be above 0 and at most {limits.MAX_TRACE_SECONDS:,}")
    if max_running is not None:
        limits.bounded_int(max_running, name="--max-running", low=1, high=limits.MAX_TOKENS)
    if page_tokens is not None:
        limits.bounded_int(page_tokens, name="--page-tokens", low=1, high=limits.MAX_REQUEST_TOKENS)
    if jobs is not None:
        limits.bounded_int(jobs, name="--jobs", low=1, high=limits.MAX_LOOP)


def _used_or_refused(ctx: typer.Context, sweep: bool, occupancy: bool) -> None:
    """Options that only a sweep or only the occupancy replay reads: typed without it, they had no effect."""
    from kvplan.cli._once import needs

    for option in ("--points", "--jobs"):
        needs(ctx, option, option[2:], "--sweep", sweep)
    for option in ("--prefill-tps", "--tpot-ms", "--max-running"):
        needs(ctx, option, option[2:].replace("-", "_"), "--occupancy", occupancy)


def simulate(
    ctx: typer.Context,
    trace: Annotated[
        Path,
        typer.Argument(
            help="Trace file, or a directory of kv-cache-tester conversations.", show_default=False, metavar="TRACE"
        ),
    ],
    trace_format: Annotated[
        str | None, typer.Option("--trace-format", help="mooncake, kvtester, azure or kvplan [default: detected].")
    ] = None,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Skip and count malformed records.")] = False,
    block_size: Annotated[
        int | None, typer.Option("--block-size", help="Tokens per trace block [default: the format's].")
    ] = None,
    semantics: Annotated[
        str | None,
        typer.Option("--semantics", help="ideal, sglang or vllm [default: ideal, or the --deploy engine]."),
    ] = None,
    policy: Annotated[
        str,
        typer.Option("--policy", help="Eviction: lru; ideal also fifo; sglang also lfu, fifo, mru, filo, priority."),
    ] = "lru",
    capacity: Annotated[
        str | None,
        typer.Option(
            "--capacity",
            help="Pool: tokens (3M, 1e6), '6000 pages', bytes per GPU (40GiB) or inf "
            "[default: the planned pool; ideal: unbounded].",
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option("--sweep", help="Hit-rate curve: LOW..HIGH tokens (log-spaced), a comma list, or 'fig9'."),
    ] = None,
    points: Annotated[int, typer.Option("--points", help="Points of a LOW..HIGH sweep.")] = 10,
    window: Annotated[
        str, typer.Option("--window", help="Measured requests: all, or last50 (the first half warms the cache).")
    ] = "all",
    occupancy: Annotated[
        bool, typer.Option("--occupancy", help="Arrivals at trace times, pages held while running (engines only).")
    ] = False,
    prefill_tps: Annotated[
        int, typer.Option("--prefill-tps", help="Occupancy: prefill tokens/s of one request (uncached tokens).")
    ] = 10_000,
    tpot_ms: Annotated[float, typer.Option("--tpot-ms", help="Occupancy: decode time per output token, ms.")] = 40.0,
    max_running: Annotated[
        int | None, typer.Option("--max-running", help="Occupancy: running requests at most [default: the plan's].")
    ] = None,
    eagle: Annotated[
        bool, typer.Option("--eagle/--no-eagle", help="EAGLE/MTP: SGLang bigram keys; vLLM drops one hit block.")
    ] = False,
    page_tokens: Annotated[
        int | None, typer.Option("--page-tokens", help="Engine page size [default: the plan's, 64 × dcp].")
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Processes for a per-capacity sweep [default: CPUs].", show_default=False),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Draw the curve or the occupancy timeline to a PNG (kvplan-llm[plot])."),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Assert the pool's invariants after every step (slow: small traces).")
    ] = False,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Replay a request trace through the prefix-cached paged pool: hit rates, evictions, waits.

    Examples: kvplan simulate mooncake/conversation_trace.jsonl --sweep fig9 --plot curve.png;
    kvplan simulate trace.jsonl --semantics sglang --occupancy
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.fsio import check_outputs
        from kvplan.lengths import ContextLimit
        from kvplan.render.sim_report import SimSetting, simulate_report, sweep_report
        from kvplan.sim import published as pub
        from kvplan.sim.paging import Paging
        from kvplan.sim.replay import Service
        from kvplan.sim.run import (
            SEMANTICS,
            CapacityScale,
            SimConfig,
            make_window,
            parse_capacity,
            parse_sweep,
            run_one,
            run_sweep,
            semantics_text,
        )
        from kvplan.sim.trace import open_trace

        _check_numbers(points, prefill_tps, tpot_ms, max_running, page_tokens, jobs)
        _used_or_refused(ctx, sweep is not None, occupancy)
        reads = check_outputs([("--plot", plot)], [trace, model, deploy])
        tr = open_trace(trace, trace_format, skip_bad=skip_bad, block_tokens=block_size)
        plan = None
        if semantics is not None and semantics not in SEMANTICS:
            raise InputError(f"--semantics {semantics!r}: use one of {', '.join(SEMANTICS)}")
        if semantics in _ENGINE_PRESETS or deploy is not None or model is not None or set_:
            preset = deploy or _ENGINE_PRESETS.get(semantics or "")
            plan = load_plan(model, preset, set_)
        sem = semantics or (plan.engine if deploy is not None and plan is not None else "ideal")
        if plan is not None and sem != "ideal" and plan.engine != sem:
            raise InputError(f"--semantics {sem} does not match the deployment's engine ({plan.engine})")

        if sem == "ideal":
            if not tr.has_blocks:
                raise InputError("ideal semantics needs block ids and this trace has none: use --semantics sglang|vllm")
            unit, unit_tokens = "block", tr.block_tokens
            if policy not in ("lru", "fifo"):
                raise InputError(f"--policy {policy!r}: ideal semantics has lru (leaf-LRU) and fifo")
            if occupancy:
                raise InputError("--occupancy needs an engine's pool: --semantics sglang or vllm")
            if eagle or page_tokens:
                raise InputError("--eagle and --page-tokens apply to engine semantics (sglang, vllm)")
        else:
            assert plan is not None
            unit, unit_tokens = "page", page_tokens or plan.logical_page_tokens
            if sem == "vllm" and policy != "lru":
                raise InputError("--policy: vLLM's free queue has one order (LRU); only --policy lru applies")
            from kvplan.sim.radix import POLICIES

            if sem == "sglang" and policy not in POLICIES:
                raise InputError(f"--policy {policy!r}: SGLang offers {', '.join(POLICIES)}")
        paging_text = Paging(tr.block_tokens, unit_tokens).describe() if sem != "ideal" else (
            f"none: the trace's own {unit_tokens}-token blocks"
        )  # fmt: skip

        scale = CapacityScale(unit_tokens, unit)
        if plan is not None:
            scale = CapacityScale(unit_tokens, unit, plan.cell.total_bytes, plan.dcp)
        win = make_window(tr, window)
        if capacity is not None:
            cap = parse_capacity(capacity, scale)
            cap_text = f"--capacity {capacity}"
            if cap is not None and scale.bytes_per_token_num and unit == "page":
                cap_text += f" (a page takes {plan.cell.total_bytes * plan.page_tokens:,} B per GPU)" if plan else ""
        elif plan is not None and (sem != "ideal" or deploy is not None):
            cap = plan.usable_tokens // unit_tokens
            cap_text = (
                f"the planned pool of {plan.deployment.name} ({plan.semantics}): {plan.usable_tokens:,} usable tokens"
                + (" (the null block excluded)" if plan.engine == "vllm" else "")
            )
        else:
            cap, cap_text = None, "unbounded"
        if sweep is not None and capacity is None:
            cap_text = "swept (below)"
        if plan is not None and plan.pools and sem != "ideal":  # a hybrid: say what the replay approximates
            from kvplan.plan.prefix import replay_approximation

            cap_text += f"; {replay_approximation(plan)}"
        if cap is None and sem != "ideal" and not sweep:
            raise InputError("engine pools are finite: give --capacity (tokens, pages or bytes) or --deploy")
        if capacity is None and cap == 0 and plan is not None and plan.startup_error and not sweep:
            raise InputError(
                f"{plan.deployment.name}: the engine would not start ({plan.startup_error}), so it has no pool; "
                "give --capacity to replay a pool of your own"
            )
        if cap is not None and cap <= 0 and not sweep:
            raise InputError(f"--capacity {capacity}: less than one {unit} of {unit_tokens} tokens")

        service = Service()
        if occupancy:
            limit = max_running if max_running is not None else (plan.max_running_requests if plan else None)
            service = Service(prefill_tps, max(1, round(tpot_ms * 1000)), limit)
        # a named deployment's engine rejects requests over its context length (kvplan.sim.context)
        named = plan is not None and (deploy is not None or model is not None or bool(set_))
        context = ContextLimit(plan.engine, plan.context_len) if named and plan is not None else None
        cfg = SimConfig(tr, sem, policy, win, unit_tokens, cap, occupancy, service, eagle, check, context)

        published: tuple[tuple[int, int], ...] = ()
        kind = pub.mooncake_trace_kind(tr.path) if tr.format == "mooncake" else None
        if kind is not None and win.start == 0:
            # Figure 9 measures the whole trace: a last-50 % curve is not comparable with it
            published = tuple(pub.fig9_points(kind))
        if sweep is not None:
            if occupancy:
                raise InputError("--sweep replays order mode; drop --occupancy (or run one pool with --capacity)")
            if sweep.strip().lower() == "fig9":
                caps = sorted({c // unit_tokens for c in pub.FIG9_CAPACITIES})
            else:
                caps = parse_sweep(sweep, scale, points)
            if min(caps) <= 0:
                raise InputError(f"--sweep {sweep}: a capacity below one {unit} of {unit_tokens} tokens")
            one_pass = sem == "ideal"
            bar = _Bar("replaying", tr.count if one_pass else lambda: len(caps))
            try:
                result: Any = run_sweep(cfg, caps, jobs=jobs or 0, progress=bar)
            finally:
                bar.close()
        else:
            if plot is not None and not occupancy:
                raise InputError("--plot draws a curve (--sweep) or an occupancy timeline (--occupancy)")
            bar = _Bar("replaying", tr.count)
            try:
                result = run_one(cfg, progress=bar)
            finally:
                bar.close()

        if result.bad_records:
            sys.stderr.write(f"kvplan: warning: skipped {result.bad_records:,} malformed record(s) (--skip-bad)\n")
        n = result.requests + result.refused.requests  # trace positions: the rejected keep theirs
        if win.start:
            win_text = (
                f"last 50%: requests {win.start:,}–{max(n - 1, 0):,} are measured, the first {win.start:,} "
                "only warm the cache (kvcache.ai's convention)"
            )
        else:
            win_text = f"all {n:,} requests"
        denominator = (
            "the tokens its blocks cover (kvcache.ai's block-weighted tokens)" if sem == "ideal" else "its input tokens"
        )
        if occupancy:
            measured = (
                "requests arrive at their trace times and hold their pages while they run; a request's hit is "
                f"its cached prefix at first admission, over {denominator}"
            )
        else:
            measured = (
                f"order mode: requests in trace order, one at a time; a request's hit is the longest run of its "
                f"leading {unit}s cached before it runs, over {denominator}; its KV is cached after it"
            )
        version = plan.engine_version if plan is not None and sem != "ideal" else ""
        setting = SimSetting(
            trace_path=str(trace),
            trace_format=tr.format,
            trace_text=tr.describe(),
            block_tokens=tr.block_tokens,
            bad_records=result.bad_records,
            semantics_text=semantics_text(cfg, version),
            paging_text=paging_text,
            capacity_text=cap_text,
            window_text=win_text,
            measurement_text=measured,
            service_text=service.describe() if occupancy else "",
            deployment=plan.deployment.name if plan is not None else "",
            bytes_per_unit=(plan.cell.total_bytes * unit_tokens // plan.dcp) if plan is not None else 0,
            published=published,
            published_label="Mooncake FAST'25 Fig. 9" if published else "",
            startup_error=plan.startup_error if plan is not None else None,
            carry=plan.deployment.carry if plan is not None else None,
            context_text=context.describe() if context is not None else "",
        )
        if sweep is not None:
            report = sweep_report(result, setting)
            if plot is not None:
                from kvplan.render.sim_plot import plot_sweep

                plot_sweep(result, plot, title=report.title, published=published,
                           published_label=setting.published_label, reads=reads)  # fmt: skip
        else:
            report = simulate_report(result, setting)
            if plot is not None:
                from kvplan.render.sim_plot import plot_occupancy

                plot_occupancy(result, plot, title=report.title, reads=reads)
        emit(report, fmt)

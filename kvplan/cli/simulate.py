from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.render import OutputFormat, Report, emit

if TYPE_CHECKING:
    from kvplan.cli._simulate import SimOptions
    from kvplan.engines.common import PoolPlan
    from kvplan.render.sim_report import SimSetting

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


TraceArg = Annotated[
    Path,
    typer.Argument(
        help="Trace file, or a directory of kv-cache-tester conversations.", show_default=False, metavar="TRACE"
    ),
]
TraceFormatOpt = Annotated[
    str | None, typer.Option("--trace-format", help="mooncake, kvtester, azure or kvplan [default: detected].")
]
SkipBadOpt = Annotated[bool, typer.Option("--skip-bad", help="Skip and count malformed records.")]
BlockSizeOpt = Annotated[
    int | None, typer.Option("--block-size", help="Tokens per trace block [default: the format's].")
]
SemanticsOpt = Annotated[
    str | None, typer.Option("--semantics", help="ideal, sglang or vllm [default: ideal, or the --deploy engine].")
]
PolicyOpt = Annotated[
    str, typer.Option("--policy", help="Eviction: lru; ideal also fifo; sglang also lfu, fifo, mru, filo, priority.")
]
CapacityOpt = Annotated[
    str | None,
    typer.Option(
        "--capacity",
        help="Pool: tokens (3M, 1e6), '6000 pages', bytes per GPU (40GiB) or inf "
        "[default: the planned pool; ideal: unbounded].",
    ),
]
SweepOpt = Annotated[
    str | None, typer.Option("--sweep", help="Hit-rate curve: LOW..HIGH tokens (log-spaced), a comma list, or 'fig9'.")
]
PointsOpt = Annotated[int, typer.Option("--points", help="Points of a LOW..HIGH sweep.")]
WindowOpt = Annotated[
    str, typer.Option("--window", help="Measured requests: all, or last50 (the first half warms the cache).")
]
OccupancyOpt = Annotated[
    bool, typer.Option("--occupancy", help="Arrivals at trace times, pages held while running (engines only).")
]
PrefillTpsOpt = Annotated[
    int, typer.Option("--prefill-tps", help="Occupancy: prefill tokens/s of one request (uncached tokens).")
]
TpotOpt = Annotated[float, typer.Option("--tpot-ms", help="Occupancy: decode time per output token, ms.")]
MaxRunningOpt = Annotated[
    int | None, typer.Option("--max-running", help="Occupancy: running requests at most [default: the plan's].")
]
EagleOpt = Annotated[
    bool, typer.Option("--eagle/--no-eagle", help="EAGLE/MTP: SGLang bigram keys; vLLM drops one hit block.")
]
PageTokensOpt = Annotated[
    int | None, typer.Option("--page-tokens", help="Engine page size [default: the plan's, 64 × dcp].")
]
JobsOpt = Annotated[
    int | None,
    typer.Option("--jobs", "-j", help="Processes for a per-capacity sweep [default: CPUs].", show_default=False),
]
PlotOpt = Annotated[
    Path | None,
    typer.Option("--plot", help="Draw the curve or the occupancy timeline to a PNG (kvplan-llm[plot])."),
]
CheckOpt = Annotated[
    bool, typer.Option("--check", help="Assert the pool's invariants after every step (slow: small traces).")
]


def simulate(
    ctx: typer.Context,
    trace: TraceArg,
    trace_format: TraceFormatOpt = None,
    skip_bad: SkipBadOpt = False,
    block_size: BlockSizeOpt = None,
    semantics: SemanticsOpt = None,
    policy: PolicyOpt = "lru",
    capacity: CapacityOpt = None,
    sweep: SweepOpt = None,
    points: PointsOpt = 10,
    window: WindowOpt = "all",
    occupancy: OccupancyOpt = False,
    prefill_tps: PrefillTpsOpt = 10_000,
    tpot_ms: TpotOpt = 40.0,
    max_running: MaxRunningOpt = None,
    eagle: EagleOpt = False,
    page_tokens: PageTokensOpt = None,
    jobs: JobsOpt = None,
    plot: PlotOpt = None,
    check: CheckOpt = False,
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
        from kvplan.cli._simulate import SimOptions, run_simulate
        from kvplan.fsio import check_outputs
        from kvplan.sim.trace import open_trace

        _check_numbers(points, prefill_tps, tpot_ms, max_running, page_tokens, jobs)
        _used_or_refused(ctx, sweep is not None, occupancy)
        o = SimOptions(trace, trace_format, skip_bad, block_size, semantics, policy, capacity, sweep, points, window,
                       occupancy, prefill_tps, tpot_ms, max_running, eagle, page_tokens, jobs, plot, check, model,
                       deploy, set_)  # fmt: skip
        reads = check_outputs([("--plot", plot)], [trace, model, deploy])
        tr = open_trace(trace, trace_format, skip_bad=skip_bad, block_tokens=block_size)
        plan, sem, hybrid_note = _plan_and_semantics(o)
        result, setting = run_simulate(o, tr, plan, sem, hybrid_note, _Bar)
        emit(_report(o, result, setting, reads), fmt)


def _plan_and_semantics(o: SimOptions) -> tuple[PoolPlan | None, str, str]:
    """The plan (a deployment, a model, --set or an engine's semantics name one), the semantics replayed, and for a
    hybrid's pool what its replay approximates."""
    from kvplan.errors import InputError
    from kvplan.sim.run import SEMANTICS

    plan = None
    if o.semantics is not None and o.semantics not in SEMANTICS:
        raise InputError(f"--semantics {o.semantics!r}: use one of {', '.join(SEMANTICS)}")
    if o.semantics in _ENGINE_PRESETS or o.deploy is not None or o.model is not None or o.set_:
        preset = o.deploy or _ENGINE_PRESETS.get(o.semantics or "")
        plan = load_plan(o.model, preset, o.set_)
    sem = o.semantics or (plan.engine if o.deploy is not None and plan is not None else "ideal")
    if plan is not None and sem != "ideal" and plan.engine != sem:
        raise InputError(f"--semantics {sem} does not match the deployment's engine ({plan.engine})")
    if plan is None or not plan.pools or sem == "ideal":
        return plan, sem, ""
    from kvplan.plan.prefix import replay_approximation  # a plan is loaded: its engines are in already

    return plan, sem, replay_approximation(plan)


def _report(o: SimOptions, result: Any, setting: SimSetting, reads: list[Path]) -> Report:
    """The curve's or the replay's report, its plot drawn where --plot asks."""
    from kvplan.render.sim_report import simulate_report, sweep_report

    if o.sweep is not None:
        report = sweep_report(result, setting)
        if o.plot is not None:
            from kvplan.render.sim_plot import plot_sweep

            plot_sweep(result, o.plot, title=report.title, published=setting.published,
                       published_label=setting.published_label, reads=reads)  # fmt: skip
        return report
    report = simulate_report(result, setting)
    if o.plot is not None:
        from kvplan.render.sim_plot import plot_occupancy

        plot_occupancy(result, o.plot, title=report.title, reads=reads)
    return report

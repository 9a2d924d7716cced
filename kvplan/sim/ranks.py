"""Occupancy replay over several DP ranks, each with its own pool, requests routed as the engine routes them.

Under DP attention each rank has its own scheduler and its own KV pool (SGLang ``--enable-dp-attention --dp N``,
vLLM ``--data-parallel-size N``): a trace replayed through one pool the size of one rank's would hold every
request in one place, which no rank does. Here each request goes to one rank, chosen by the engine's own router
(``round_robin`` on SGLang, ``least_unfinished`` on vLLM: the engines' code at ``ROUTERS``), and every rank's
pool replays its share in time order (``kvplan.sim.replay``'s occupancy mode, stepped).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvplan.errors import InputError
from kvplan.sim.ideal import Window
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Pool
from kvplan.sim.replay import Service, _Occupancy
from kvplan.sim.result import SimResult
from kvplan.sim.trace import Request

# ``round_robin``: SGLang 0.5.23's default. ``load_balance_method`` defaults to ``"auto"``
# (``srt/arg_groups/fields/parallel.py``), which ``handle_load_balance_method``
# (``srt/arg_groups/serving_hook.py``) resolves to ``round_robin`` outside PD (``follow_bootstrap_room`` on a PD
# prefill server); ``DataParallelController.round_robin_scheduler`` (``srt/managers/data_parallel_controller.py``)
# sends each request to the next active worker in turn: request k of the trace goes to rank k mod N.
# ``least_unfinished``: vLLM 0.33.0's ``DPLBAsyncMPClient.get_core_engine_for_request``
# (``v1/engine/core_client.py``): with one API client, the score of an engine is
# ``max(its requests in flight from this client, the coordinator's waiting + running snapshot)``, the lowest
# score wins, ties to the lowest rank. Replayed as: the rank with the fewest unfinished requests (waiting or
# running) at the arrival, ties to the lowest rank. Not replayed: the coordinator's 100 ms snapshot (with one
# client it can only lag the exact in-flight count) and the KV-pressure penalty on a rank with waiting requests
# (``+ waiting x 6 x max(0, kv_cache_usage - 0.5)``), which only applies once requests already wait.
ROUTERS = ("round_robin", "least_unfinished")
ENGINE_ROUTER = {"sglang": "round_robin", "vllm": "least_unfinished"}
ROUTER_TEXT = {
    "round_robin": "SGLang 0.5.23 DP controller, load_balance_method auto -> round_robin: request k to rank k mod N",
    "least_unfinished": "vLLM 0.33.0 DPLBAsyncMPClient: to the rank with the fewest unfinished requests "
    "(ties: lowest rank); its 100 ms load snapshot and KV-pressure penalty are not replayed",
}


@dataclass(frozen=True)
class Stop:
    """Where a replay asked to stop at the first shortfall stopped."""

    index: int
    """The request that arrived and waited or was dropped; -1 when a running request's next page preempted one."""
    line: int
    time_us: int
    rank: int
    what: str
    """'waited', 'preempted' or 'too long'."""
    held_pages: int
    running: int


@dataclass(frozen=True)
class RankResult:
    """One rank's replay and what it held at most."""

    result: SimResult
    peak_held_pages: int
    """Pages held by running requests at most (cached, unreferenced pages not counted)."""
    requests: int
    """Requests routed to this rank."""


def replay_ranks(
    requests: Iterable[Request],
    pools: list[Pool],
    paging: Callable[[], Paging],
    *,
    service: Service,
    router: str,
    until_short: bool = False,
) -> tuple[tuple[RankResult, ...], Stop | None]:
    """Route each request to one of ``pools`` (one per DP rank) and replay all ranks in time order.

    ``until_short``: stop at the first request not admitted on arrival, preempted or too long for its rank's
    pool (a pass / fail question needs no more); the ranks' results then cover the trace up to there."""
    if router not in ROUTERS:
        raise ValueError(f"router {router!r}")
    window = Window("all", 0)
    sims = [_Occupancy(p, paging(), service, window, None) for p in pools]
    counts = [0] * len(sims)
    rr = 0
    last = -1
    stop: Stop | None = None

    def short(k: int, r: Request | None) -> Stop | None:
        """Rank k's first shortfall, if it has one now (r: the request that just arrived there)."""
        s = sims[k]
        what = "waited" if s.waiting else "preempted" if s.occ.preemptions else "too long" if s.too_long else ""
        if not what:
            return None
        idx, line = (r.index, r.line) if r is not None else (-1, 0)
        return Stop(idx, line, s.now, k, what, s.pool.held_pages(), len(s.running))

    for r in requests:
        if r.arrival_us < last:
            raise InputError(
                f"request {r.index} (line {r.line}) arrives before the one before it: occupancy mode "
                "needs the trace sorted by arrival time"
            )
        last = r.arrival_us
        for i, s in enumerate(sims):  # every event due before the arrival (an arrival goes before one at that time)
            while (t := s.next_event_us()) is not None and t < r.arrival_us:
                if s.handle_event():
                    s.settle()
                    if until_short and (stop := short(i, None)) is not None:
                        break
            if stop is not None:
                break
        if stop is not None:
            break
        if router == "round_robin":
            k, rr = rr, (rr + 1) % len(sims)
        else:
            k = min(range(len(sims)), key=lambda i: (len(sims[i].running) + len(sims[i].waiting), i))
        sims[k].arrive(r)
        sims[k].settle()
        counts[k] += 1
        if until_short and (stop := short(k, r)) is not None:
            break
    out = []
    for i, (s, n) in enumerate(zip(sims, counts, strict=True)):
        while stop is None and (s.events or s.waiting):
            if s.next_event_us() is not None:
                if not s.handle_event():
                    continue
            elif s.running:
                raise AssertionError("running requests without events")
            s.settle()
            if until_short:
                stop = short(i, None)
        res = s.result()
        assert res.occupancy is not None
        peak = max((p[3] for p in res.occupancy.timeline), default=0)
        out.append(RankResult(res, peak, n))
    return tuple(out), stop

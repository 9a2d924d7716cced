"""kvplan.perf.predict under DP attention: each rank's scheduler runs its share of a closed loop's clients (SGLang's
``DataParallelController`` sends requests round robin to one ``Scheduler`` a rank), priced as every busy rank's batch
at once (``Batch.across``)."""

from __future__ import annotations

from kvplan.cli._common import load_plan
from kvplan.perf.predict import perf


def test_sixteen_clients_over_eight_dp_ranks_run_two_a_rank() -> None:
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"])
    r = perf(plan.arch, plan, isl=1024, osl=64, concurrency=16)
    # 16 clients over 8 ranks: 2 a rank, all 8 busy; 3 requests a client (1 warm-up, 2 measured) → 48 requests
    assert r.peak_running == 16 and r.num_prompts == 48
    assert any("each of 8 of 8 ranks schedules 2 of them" in a for a in r.assumptions)


def test_fewer_clients_than_ranks_leave_ranks_idle() -> None:
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"])
    # 3 clients over 8 ranks: 1 a rank, 3 busy, 5 idle
    r = perf(plan.arch, plan, isl=1024, osl=64, concurrency=3)
    assert r.peak_running == 3 and any("each of 3 of 8 ranks schedules 1 of them" in a for a in r.assumptions)

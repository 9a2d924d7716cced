"""kvplan.perf.predict under DP attention: every rank schedules its own requests (SGLang ``DataParallelController``
sends requests round robin to one ``Scheduler`` a rank; vLLM runs one ``EngineCore`` a rank). What one rank may
prefill a step differs: SGLang divides its chunk among the ranks, vLLM gives each rank the whole budget."""

from __future__ import annotations

import pytest

from kvplan.cli._common import load_plan
from kvplan.perf.predict import perf, running_cap
from kvplan.perf.sched import closed_loop


def test_sglang_divides_its_chunk_among_eight_dp_ranks() -> None:
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"])
    # SGLang on H200 (143,771 MiB): chunked_prefill_size 8,192 by default; server_args._handle_data_parallelism
    # sets chunked_prefill_size //= dp_size under DP attention ("adjusted ... to avoid MoE kernel issues"):
    # 8,192 // 8 = 1,024 tokens a rank, 8 × 1,024 = 8,192 a step in all
    r = perf(plan.arch, plan, isl=8192, osl=64, concurrency=16)
    assert r.budget_tokens == 1024
    assert "÷ 8 DP ranks" in r.budget_from and r.budget_from.startswith("chunked_prefill_size 8,192")
    assert any("8 ranks, each its own scheduler and budget of 1,024 tokens a step (8,192 in all)" in a
               for a in r.assumptions)  # fmt: skip


def test_the_closed_loop_schedules_every_ranks_budget_and_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # the loop stands for the 8 ranks' schedulers together: each step takes 8 × the rank's budget (1,024 a rank
    # under SGLang DP8, above) and runs up to 8 × the rank's running cap
    from kvplan.perf import predict

    seen = []

    def spy(**kw: object) -> object:
        seen.append((kw["budget"], kw["cap"]))
        return closed_loop(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(predict, "closed_loop", spy)
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"])
    r = perf(plan.arch, plan, isl=8192, osl=64, concurrency=16)
    assert seen and all(b == 8 * r.budget_tokens == 8192 for b, _ in seen)
    assert all(c == 8 * max(plan.max_running_requests, 1) for _, c in seen)


def test_vllm_gives_each_dp_rank_its_whole_budget() -> None:
    plan = load_plan(None, "glm-5.3-8xh200-vllm", ["dp_attention=8"])
    # vLLM: each DP rank is an EngineCore with its own SchedulerConfig.max_num_batched_tokens (8,192 by default on
    # this GPU), nothing divided: 8 × 8,192 = 65,536 tokens a step in all
    r = perf(plan.arch, plan, isl=8192, osl=64, concurrency=16)
    assert r.budget_tokens == 8192 and "DP ranks" not in r.budget_from
    assert any("8 ranks, each its own scheduler and budget of 8,192 tokens a step (65,536 in all)" in a
               for a in r.assumptions)  # fmt: skip


def test_the_running_cap_counts_every_ranks_pool() -> None:
    # each DP rank holds its own pool (plan.usable_tokens a rank); requests of 128K + 1K tokens: the ranks together
    # hold usable × 8 // 132,096 of them, below max_running_requests 2,048 (64,576 × 8 // 132,096 = 3 on this plan)
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"])
    cap, said = running_cap(plan, 131072, 1024)
    assert cap == plan.usable_tokens * 8 // 132096 == 3
    assert said == f"pool {plan.usable_tokens:,} tokens × 8 DP rank(s) // (isl + osl) = 3"

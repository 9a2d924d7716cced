"""kvplan.perf.predict under DP attention: every rank schedules its own requests with its own token budget (SGLang
``DataParallelController`` sends requests round robin to one ``Scheduler`` a rank; vLLM runs one ``EngineCore`` a
rank), so a step of the whole deployment takes ranks × the budget."""

from __future__ import annotations

from kvplan.cli._common import load_plan
from kvplan.perf.predict import perf


def test_eight_dp_ranks_prefill_eight_budgets_a_step() -> None:
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"])
    # SGLang on H200: chunked_prefill_size 8,192 a rank (r.budget_tokens); 8 ranks → 65,536 tokens a step in all
    r = perf(plan.arch, plan, isl=8192, osl=64, concurrency=16)
    assert r.budget_tokens == 8192
    assert any("8 ranks, each its own scheduler and budget of 8,192 tokens a step (65,536 in all)" in a
               for a in r.assumptions)  # fmt: skip
    # 16 clients of 8,192 tokens: 8 prompts a step, so a request waits at most one other prefill step for its own,
    # where one scheduler's 8,192 tokens a step would queue the 16th behind 15 prefills
    one = perf(plan.arch, load_plan(None, "glm-5.3-8xh200-sglang", []), isl=8192, osl=64, concurrency=16)
    assert r.us["ttft_p90"].value < one.us["ttft_p90"].value

"""A run of decode steps (kvplan.perf.step.Batch.repeat, made by kvplan.perf.engine's ``_coast``) is priced and timed
exactly as its steps one by one: the same floats, not an approximation (kvplan.perf.predict._Pricer.each,
kvplan.perf.sched.timings)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.cli._common import load_plan
from kvplan.models.arch import Split
from kvplan.perf.coeffs import coefficients_for
from kvplan.perf.peaks import peaks_of
from kvplan.perf.predict import _Pricer
from kvplan.perf.sched import closed_loop, timings
from kvplan.perf.shape import step_shape
from kvplan.perf.step import Batch


@pytest.mark.parametrize(
    ("model", "context"),
    [
        ("glm-5.3", 3 * 2_100),  # DSA: keys capped at index_topk 2,048, the indexer scoring every key
        ("llama-3.1-8b", 3 * 500),  # GQA
        ("gpt-oss-120b", 3 * 127),  # sliding window (128) beside full attention
        ("qwen3-next-80b-a3b", 3 * 900),  # linear attention's state beside full attention
    ],
)
def test_a_run_is_priced_as_its_steps_one_by_one(model: str, context: int) -> None:
    # 3 requests, 40 steps from a mean context just under a cap or window: the run crosses it (min(m, cap) turns)
    plan = load_plan(model, "glm-5.3-8xh200-sglang", ["tp=1"] if model != "glm-5.3" else [])
    dep = plan.deployment
    peaks = peaks_of(dep.gpu)
    assert peaks is not None
    coeffs, _ = coefficients_for(peaks.gpu_class, plan.engine, plan.engine_version, "mla", "fp8")
    for phase in (False, True):  # a PD decode instance prices the run's decodes alone (decode_share)
        price = _Pricer(step_shape(plan.arch), Split.of(tp=dep.tp, dp_attention=1, ep=dep.ep), ("bf16", "bf16"), 2, 1,
                        peaks, coeffs, decode=phase)  # fmt: skip
        run = Batch(decode_requests=3, decode_context=context, sampled=3, repeat=40)
        assert price.each(run) == [price(b) for b in run.each()]
        assert [b.decode_context for b in run.each()][:3] == [context, context + 3, context + 6]


def test_a_schedule_of_runs_is_timed_as_its_steps() -> None:
    # a closed loop whose decode steps ran as runs, and the same schedule one step an entry: the same figures
    s = closed_loop(engine="sglang", isl=300, osl=5000, concurrency=6, cap=6, budget=512, num_prompts=18, warmup=6,
                    steady=True, pool=12_000)  # fmt: skip
    assert len(s.runs) < len(s.steps)
    prices = [1e-3 * (1 + (i % 7)) for i in range(len(s.steps))]
    assert timings(s, prices, 5000) == timings(replace(s, runs=s.steps), prices, 5000)

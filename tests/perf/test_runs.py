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
from kvplan.perf.predict import GemmFormats, _Pricer
from kvplan.perf.sched import closed_loop, timings
from kvplan.perf.shape import StepShape, step_shape
from kvplan.perf.step import Batch, attention_each, attention_part


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
        price = _Pricer(step_shape(plan.arch), Split.of(tp=dep.tp, dp_attention=1, ep=dep.ep),
                        GemmFormats("bf16", "bf16", "bf16"), 2, 1,
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


def _shapes() -> dict[str, StepShape]:
    shapes = {m: step_shape(load_plan(m, "glm-5.3-8xh200-sglang", []).arch)
              for m in ("llama-3.1-8b", "deepseek-v3", "glm-5.3", "gpt-oss-120b", "qwen3-next-80b-a3b")}  # fmt: skip
    dsa, swa = shapes["glm-5.3"].attention[0], shapes["gpt-oss-120b"].attention[0]
    linear = next(g for g in shapes["qwen3-next-80b-a3b"].attention if g.kind == "linear")
    # no model has these yet: two groups of which one is read whole by each attention rank (MLA's latent), and a
    # linear state alone (its terms are the same every step, the only ones that are)
    shapes["dsa beside a window"] = replace(shapes["glm-5.3"], attention=(dsa, replace(swa, layers=3)))
    shapes["linear alone"] = replace(shapes["qwen3-next-80b-a3b"], attention=(linear,))
    return shapes


@pytest.mark.parametrize("bound", ["compute", "memory"])
def test_a_runs_attention_is_each_steps_attention_part_through_the_roofline(bound: str) -> None:
    # attention_each fuses attention_part and the roofline for a run's steps; the contract is the same integers and
    # floats as each step alone: max(flops / compute, bytes / memory) + the rest, at tp 2 with 2 attention ranks (so
    # the tp division and MLA's whole-latent reads act), with one rate made tiny so that each side decides in turn
    # (a decode step's attention is otherwise memory-bound and its FLOPs never show)
    rates = (3.7, 1e30) if bound == "compute" else (1e30, 3.7)  # 3.7: a true division differs from a floor
    split = Split.of(tp=2, dp_attention=1, ep=1)
    shapes = _shapes()
    assert sorted(len(s.attention) for s in shapes.values()) == [1, 1, 1, 1, 2, 2, 2]  # one group, and several
    for name, shape in shapes.items():
        for kv_bytes in (1, 2):
            run = Batch(decode_requests=3, decode_context=3 * 2_030, sampled=3, repeat=40)  # crosses top-k 2,048
            means = range(2_030, 2_070)
            each = attention_each(shape, run, split, kv_bytes, means, rates, 0.25)
            parts = [attention_part(shape, b, split, kv_bytes) for b in run.each()]
            assert each == [0.25 + max(p.flops / rates[0], p.bytes / rates[1]) for p in parts], name
            # the steps differ (their contexts do), but where a linear state alone is read
            assert (len(set(each)) == 1) == (name == "linear alone"), name

"""kvplan.perf.trace_loop (perf --trace): requests at their trace times with their own lengths, priced step by step.

The hand-derived case prices steps with the step model's formula (kvplan.perf.step: a step is its layers' fixed
latency plus, per part, max(FLOPs / (peak × efficiency), bytes / (HBM × memory efficiency))) on a toy model: no
attention layers, 499,000 dense parameters and an LM head of 10 × 100 = 1,000, bf16 (1,000,000 weight bytes a step),
tp 1 (no all-reduce), a GPU of 10^12 FLOP/s and 10^9 B/s, every efficiency 1, one layer of 1 ms fixed latency. A step
of T tokens sampling S is then 1 ms + max(2 (499,000 T + 1,000 S) / 10^12, 1 ms)."""

from __future__ import annotations

import pytest

from kvplan.models.arch import Split
from kvplan.perf.coeffs import Coefficients
from kvplan.perf.peaks import Peaks
from kvplan.perf.shape import StepShape
from kvplan.perf.step import Batch, parts, step_seconds
from kvplan.perf.trace_loop import Arrival, trace_loop, trace_timings

SHAPE = StepShape(name="toy", hidden=10, vocab=100, layers=1, dense_params=499_000, routed_params=0, num_experts=0,
                  experts_per_token=0, attention=())  # fmt: skip
PEAKS = Peaks(gpu_key="toy", gpu_class="hopper", bf16_flops_per_s=10**12, fp8_flops_per_s=10**12, fp4_flops_per_s=0,
              hbm_bytes_per_s=10**9, link_bytes_per_s=10**9, source="toy")  # fmt: skip
COEFFS = Coefficients(gpu_class="hopper", engine="vllm", versions=("0", "0"), family="gqa", gemm_eff=1.0,
                      prefill_eff=1.0, attention_eff=1.0, mem_eff=1.0, link_eff=1.0, comm_us=0.0, layer_us=1000.0,
                      fitted_on="toy", heldout_mape=(0.0, 0.0, 0.0))  # fmt: skip


def price(b: Batch) -> float:
    return step_seconds(parts(SHAPE, b, Split.of(tp=1, dp_attention=1, ep=1), "bf16", "bf16"), PEAKS, COEFFS)


def test_the_step_formula_of_the_toy_model() -> None:
    # one layer's 1 ms + 4,000 prefill tokens, 1 sampled: 2 (4,000 × 499,000 + 1,000) = 3,992,002,000 FLOPs =
    # 3.992002 ms > 1 ms read
    assert price(Batch(prefill_tokens=4000, sampled=1)) == pytest.approx(1e-3 + 3.992002e-3, abs=1e-12)
    # one decode: 1,000,000 FLOPs (1 µs) under the 1 ms weight read
    assert price(Batch(decode_requests=1, decode_context=10, sampled=1)) == pytest.approx(2e-3, abs=1e-12)


def test_three_requests_by_hand_under_vllm() -> None:
    # r0 at 0 s (4,000 + 3 tokens), r1 at 2.5 ms (2,000 + 2), r2 at 1 s (1,000 + 1); vLLM V1, budget 8,192.
    # step 0 [0, 4.992002 ms]: prefills r0 (above); r0's first token. r1 arrived during it.
    # step 1: decodes r0 and prefills r1 (2,001 tokens, 2 sampled): 2 (2,001 × 499,000 + 2 × 1,000) = 1,997,002,000
    #   FLOPs: 1 + 1.997002 = 2.997002 ms, ends 7.989004 ms: r0's 2nd token, r1's first (TTFT 7.989004 − 2.5)
    # step 2: decodes both (2 tokens: 2 µs of compute under the 1 ms read): 2 ms, ends 9.989004 ms: r0's 3rd and
    #   r1's 2nd tokens, both finish. TPOT r0 (9.989004 − 4.992002) / 2, r1 (7.489004 − 5.489004) / 1 = 2 ms.
    # idle until r2 at 1 s; step 3 prefills its 1,000 (0.998002 ms of compute < 1 ms read): 2 ms, one token, done
    arrivals = (Arrival(0, 4000, 3, "r0"), Arrival(2500, 2000, 2, "r1"), Arrival(1_000_000, 1000, 1, "r2"))
    s = trace_loop(engine="vllm", arrivals=arrivals, cap=8, budget=8192, pool=0, price=price)
    assert s.steps[1] == Batch(prefill_tokens=2000, prefill_pairs=2000 * 2001 // 2, decode_requests=1,
                               decode_context=4001, sampled=2)  # fmt: skip
    t = trace_timings(s)
    ms = 1e-3
    assert t.ttft == pytest.approx((4.992002 * ms, 5.489004 * ms, 2 * ms), abs=1e-12)
    assert t.e2e == pytest.approx((9.989004 * ms, 7.489004 * ms, 2 * ms), abs=1e-12)
    assert t.tpot == pytest.approx(((9.989004 - 4.992002) / 2 * ms, 2 * ms), abs=1e-12)  # r2 (1 token) has none
    assert t.duration == pytest.approx(1.002, abs=1e-12)
    # ITL: step 1's gap (2.997002 ms, 1 token) and step 2's (2 ms, 2 tokens): the median token's gap is 2 ms
    assert t.itl_median == pytest.approx(2 * ms, abs=1e-12)


def test_the_same_three_requests_under_sglang() -> None:
    # SGLang runs a prefill batch before any decode (Scheduler.get_next_batch_to_run). Step 0 prefills r0 (4.992002
    # ms, as above); step 1 prefills r1 alone (2,000 tokens, 1 sampled: 2 (2,000 × 499,000 + 1,000) = 1,996,002,000
    # FLOPs, 1 + 1.996002 ms), ends 7.988004 ms: r1's TTFT 5.488004 ms; step 2 decodes both (2 ms, ends 9.988004):
    # r0's 2nd and r1's last token; step 3 decodes r0's 3rd (2 ms, ends 11.988004). TPOT r0 (11.988004 − 4.992002)
    # / 2 = 3.498001 ms, r1 2 ms; r2 alone at 1 s: 2 ms
    arrivals = (Arrival(0, 4000, 3, "r0"), Arrival(2500, 2000, 2, "r1"), Arrival(1_000_000, 1000, 1, "r2"))
    t = trace_timings(trace_loop(engine="sglang", arrivals=arrivals, cap=8, budget=8192, pool=0, price=price))
    ms = 1e-3
    assert t.ttft == pytest.approx((4.992002 * ms, 5.488004 * ms, 2 * ms), abs=1e-12)
    assert t.e2e == pytest.approx((11.988004 * ms, 7.488004 * ms, 2 * ms), abs=1e-12)
    assert t.tpot == pytest.approx((3.498001 * ms, 2 * ms), abs=1e-12)
    assert t.itl_median == pytest.approx(2 * ms, abs=1e-12)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_invariants_on_a_busy_trace(engine: str) -> None:
    # 30 requests 1 ms apart of varied lengths, a pool of 40,000 tokens that forces vLLM to preempt: the step that
    # samples a request's first token (its last prefill chunk) starts no earlier than its arrival, and its TTFT is
    # at least that step, a prefill step (at least the shortest prefill step of the run)
    arrivals = tuple(Arrival(1000 * i, 500 + 700 * (i % 7), 50 + 40 * (i % 5), f"r{i}") for i in range(30))
    s = trace_loop(engine=engine, arrivals=arrivals, cap=64, budget=2048, pool=40_000, price=price)
    shortest_prefill = min(price(b) for b in s.steps if b.prefill_tokens)
    for rid, a in enumerate(s.arrival_s):
        step = s.first[rid]
        assert s.steps[step].prefill_tokens > 0
        assert s.ends[step] - price(s.steps[step]) >= a - 1e-12
        assert s.ends[step] - a >= shortest_prefill - 1e-12
        assert step <= s.finished[rid]
    assert len(trace_timings(s).ttft) == 30 and (s.preemptions > 0) == (engine == "vllm")


def test_bad_requests_are_one_line() -> None:
    with pytest.raises(ValueError, match=r"x.jsonl:3: a request of 30 \+ 5 tokens is larger than the whole pool"):
        trace_loop(engine="vllm", arrivals=(Arrival(0, 30, 5, "x.jsonl:3"),), cap=1, budget=8, pool=20, price=price)
    with pytest.raises(ValueError, match="at least 1 of each"):
        trace_loop(engine="vllm", arrivals=(Arrival(0, 30, 0, "x.jsonl:3"),), cap=1, budget=8, pool=0, price=price)
    with pytest.raises(ValueError, match="in arrival order"):
        trace_loop(engine="vllm", arrivals=(Arrival(5, 3, 1, "a"), Arrival(0, 3, 1, "b")), cap=1, budget=8, pool=0,
                   price=price)  # fmt: skip

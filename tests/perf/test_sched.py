"""kvplan.perf.sched: the closed loop as each engine's scheduler runs it, step by step (expected schedules derived
here from SGLang's Scheduler.get_next_batch_to_run and vLLM V1's Scheduler.schedule)."""

from __future__ import annotations

import pytest

from kvplan.perf.sched import closed_loop, timings
from kvplan.perf.step import Batch


def test_sglang_runs_prefill_batches_before_decoding() -> None:
    # 2 clients, 10 + 3 tokens, chunk 100: step 0 prefills both (20 tokens, 2 × 55 pairs, 2 first tokens); steps 1, 2
    # decode both (contexts 11 + 11, then 12 + 12); both finish at step 2 and their clients send the next two, which
    # prefill at step 3 (a prefill batch runs before any decode) and decode at steps 4, 5
    s = closed_loop(engine="sglang", isl=10, osl=3, concurrency=2, cap=2, budget=100, num_prompts=4)
    assert s.steps[0] == Batch(prefill_tokens=20, prefill_pairs=110, sampled=2)
    assert s.steps[1:3] == (Batch(decode_requests=2, decode_context=22, sampled=2),
                            Batch(decode_requests=2, decode_context=24, sampled=2))  # fmt: skip
    assert len(s.steps) == 6 and s.steps[3].prefill_tokens == 20
    assert (s.arrived, s.first, s.finished) == ((-1, -1, 2, 2), (0, 0, 3, 3), (2, 2, 5, 5))


def test_vllm_mixes_decodes_with_chunked_prefill() -> None:
    # budget 12: step 0 prefills r0 (10) and 2 tokens of r1 (pairs 55 + 3); step 1 decodes r0 (context 11) and
    # prefills r1's last 8 (pairs 8 × 2 + 36 = 52), sampling r0's token and r1's first; r0 finishes at step 2 (its
    # 3rd token), r1 at step 3
    s = closed_loop(engine="vllm", isl=10, osl=3, concurrency=2, cap=2, budget=12, num_prompts=2)
    assert s.steps[0] == Batch(prefill_tokens=12, prefill_pairs=58, sampled=1)
    assert s.steps[1] == Batch(prefill_tokens=8, prefill_pairs=52, decode_requests=1, decode_context=11, sampled=2)
    assert (s.first, s.finished) == ((0, 1), (2, 3))


def test_the_running_cap_queues_the_rest() -> None:
    # cap 1 (the pool holds one request): the second client's request waits for the first to finish; its TTFT
    # is then the first's whole service plus its own prefill
    s = closed_loop(engine="sglang", isl=10, osl=2, concurrency=2, cap=1, budget=100, num_prompts=2)
    assert (s.first, s.finished, s.peak_running) == ((0, 2), (1, 3), 1)
    t = timings(s, [1.0, 0.5, 1.0, 0.5], osl=2)
    assert t.ttft == (1.0, 2.5) and t.tpot == (0.5, 0.5) and t.duration == 3.0


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        closed_loop(engine="vllm", isl=0, osl=3, concurrency=2, cap=2, budget=12, num_prompts=2)


def test_itl_counts_the_prefill_batches_between_two_decode_steps() -> None:
    # the SGLang schedule of the first test: steps 0 prefill (1 s), 1-2 decode (0.5 s each), 3 prefill (1 s), 4-5
    # decode. Gaps of 2 tokens each: step 1 = 0.5 (after the prefill's end), step 2 = 0.5, step 4 = 1 + 0.5 = 1.5
    # (the prefill at step 3 sits between), step 5 = 0.5: the median over 8 tokens is 0.5
    s = closed_loop(engine="sglang", isl=10, osl=3, concurrency=2, cap=2, budget=100, num_prompts=4)
    t = timings(s, [1.0, 0.5, 0.5, 1.0, 0.5, 0.5], osl=3)
    assert t.itl_median == 0.5 and t.ttft == (1.0, 1.0, 1.0, 1.0)
    # decodes of 2 s around a 1 s prefill: gaps 2, 2, 1 + 2 = 3, 2; the lower weighted median of 8 tokens is 2,
    # and with the prefill at 5 s step 4's gap is 7: still 2 (a median, not a mean)
    assert timings(s, [1.0, 2.0, 2.0, 1.0, 2.0, 2.0], osl=3).itl_median == 2.0
    assert timings(s, [1.0, 2.0, 2.0, 5.0, 2.0, 2.0], osl=3).itl_median == 2.0

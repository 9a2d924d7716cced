"""kvplan.perf.engine: admission and preemption under a KV pool, the expected schedules derived here by hand from
vLLM V1's Scheduler.schedule (running first, ``self.running.pop()`` then ``_preempt_request`` when
``allocate_slots`` fails, no waiting admitted in a step that preempted) and SGLang's ``PrefillAdder.add_one_req`` /
``Scheduler.update_running_batch`` → ``ScheduleBatch.retract_decode``."""

from __future__ import annotations

import pytest

from kvplan.perf.sched import closed_loop, timings
from kvplan.perf.step import Batch


def test_vllm_preempts_the_newest_running_request_and_recomputes_it() -> None:
    # 2 clients of 4 + 4 tokens, pool 12 (two whole requests need 16). Step 0 prefills both (8 tokens, 2 × 10 pairs),
    # context 5 + 5 = 10; step 1 decodes both (free 2, needs 2), context 12; step 2 needs 2 free and has 0: the
    # newest, r1 (2 tokens out), is preempted (its 6 freed: context 6; its 5 computed tokens left in the prefix
    # cache) and r0 decodes alone; step 3: r1's recompute of 4 + 2 = 6 tokens hits min(5 cached, 5 free) = 5 and
    # needs 1 more block-token, of 5 − 5 = 0 left: r0 decodes its last token instead (finishes at step 3); step 4
    # computes r1's last token after the 5 cached (1 × 5 + 1 = 6 pairs), sampling its 3rd; step 5 decodes its 4th
    s = closed_loop(engine="vllm", isl=4, osl=4, concurrency=2, cap=2, budget=100, num_prompts=2, pool=12)
    assert s.steps == (
        Batch(prefill_tokens=8, prefill_pairs=20, sampled=2),
        Batch(decode_requests=2, decode_context=10, sampled=2),
        Batch(decode_requests=1, decode_context=6, sampled=1),
        Batch(decode_requests=1, decode_context=7, sampled=1),
        Batch(prefill_tokens=1, prefill_pairs=6, sampled=1),
        Batch(decode_requests=1, decode_context=7, sampled=1),
    )
    assert (s.first, s.finished, s.preemptions) == ((0, 0), (3, 5), 1)
    # without the pool both finish at step 3: the preemption costs r1 two steps
    free = closed_loop(engine="vllm", isl=4, osl=4, concurrency=2, cap=2, budget=100, num_prompts=2)
    assert (free.finished, free.preemptions) == ((3, 3), 0)


def test_sglang_retracts_the_request_with_the_fewest_outputs_and_resets_its_ratio() -> None:
    # 2 clients of 2 + 10 tokens, pool 20. Admission at new_token_ratio 0.7: r0 needs 2 + 10 × 0.7 = 9 of 20; r1
    # 9 + r0's 10 × 0.7 = 16 of the 18 left: both prefill at step 0 (4 tokens, 2 × 3 pairs), context 3 + 3. Steps
    # 1-7 decode both (context 6, 8, …, 18; free 14 − 2k ≥ 2); after step 7 the context is 20: step 8's decode does
    # not fit (check_decode_mem), retract_decode takes r1 (both 8 out, the later one last in the stable order),
    # freeing its 10, and the ratio resets to min(1, (8 + 20 × 1) / 10) = 1. Step 9: r1 needs 2 + 8 = 10 tokens plus
    # min(10 − 8, 4096) × 1 = 12 against 20 − 11 = 9 free: r0 decodes its last token instead (finishes at 9);
    # step 10 prefills r1's 10 tokens (55 pairs), step 11 decodes its 10th token
    s = closed_loop(engine="sglang", isl=2, osl=10, concurrency=2, cap=2, budget=100, num_prompts=2, pool=20)
    assert s.steps[0] == Batch(prefill_tokens=4, prefill_pairs=6, sampled=2)
    assert [b.decode_context for b in s.steps[1:10]] == [6, 8, 10, 12, 14, 16, 18, 10, 11]
    assert [b.decode_requests for b in s.steps[1:10]] == [2] * 7 + [1, 1]
    assert s.steps[10] == Batch(prefill_tokens=10, prefill_pairs=55, sampled=1)
    assert (s.first, s.finished, s.preemptions, len(s.steps)) == ((0, 0), (9, 11), 1, 12)
    free = closed_loop(engine="sglang", isl=2, osl=10, concurrency=2, cap=2, budget=100, num_prompts=2)
    assert (free.finished, free.preemptions) == ((9, 9), 0)


def test_a_preempted_partial_prefill_waits_on_its_cached_chunks() -> None:
    # 3 clients of 8 + 3 tokens, budget 4, pool 14 (one whole request is 11). Steps 0-1 prefill r0 (4 + 4: context
    # 9); step 2 decodes r0 and prefills 3 of r1 (free 14 − 9 = 5); step 3: r1's next 3 do not fit in 14 − 3 − 10 =
    # 1: r1, the newest, is preempted (its 3 tokens left in the prefix cache) while r0 decodes its last token
    # (finishes at 3). Step 4: r1 hits its 3 cached tokens and computes 4 more (4 × 3 + 10 = 22 pairs); step 5 its
    # last (1 × 7 + 1 = 8 pairs, first token) and 3 of r2 (6 pairs); step 6: r2's next 3 do not fit in 14 − 3 − 9
    # = 2: preempted; step 7: r2's 5 left need 3 of the 4 − 3 cached = 1 free: it waits, r1 finishes; step 8 hits
    # 3 and computes 4 (22 pairs), step 9 its last; steps 10-11 decode it. Two preemptions, none re-prefilled
    s = closed_loop(engine="vllm", isl=8, osl=3, concurrency=3, cap=3, budget=4, num_prompts=3, pool=14)
    assert s.steps[3] == Batch(decode_requests=1, decode_context=10, sampled=1)
    assert s.steps[4] == Batch(prefill_tokens=4, prefill_pairs=22)
    assert s.steps[5] == Batch(prefill_tokens=4, prefill_pairs=14, sampled=1)
    assert s.steps[7] == Batch(decode_requests=1, decode_context=10, sampled=1)
    assert s.steps[8] == Batch(prefill_tokens=4, prefill_pairs=22)
    assert (s.first, s.finished, s.preemptions, len(s.steps)) == ((1, 5, 9), (3, 7, 11), 2, 12)


def test_sglang_reserves_the_output_so_it_admits_fewer_than_vllm() -> None:
    # 4 + 4 tokens, pool 12: r0 reserves 4 + 4 × 0.7 = 6.8, r1 would need 6.8 + 2.8 = 9.6 of 12 − 4 = 8: SGLang
    # admits one at a time and never retracts; vLLM admits both (above) and preempts
    s = closed_loop(engine="sglang", isl=4, osl=4, concurrency=2, cap=2, budget=100, num_prompts=2, pool=12)
    assert (s.peak_running, s.preemptions) == (1, 0)


def test_a_request_larger_than_the_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="larger than the whole pool"):
        closed_loop(engine="vllm", isl=10, osl=4, concurrency=1, cap=1, budget=100, num_prompts=1, pool=12)


def test_a_pool_too_small_for_the_clients_preempts_and_lengthens_tpot_and_e2e() -> None:
    # 4 clients of 8 + 8 tokens in the steady state, every step priced 1 s: a pool of 40 tokens holds 2.5 whole
    # requests, so the running set's growth does not fit and vLLM preempts; with room for all 4 (64 tokens) it never
    # does. Each preemption recomputes and makes its request wait: mean TPOT and median e2e grow (measured: 5
    # preemptions, TPOT 1.05 against 1.0 s, e2e 11 against 9 s)
    def run(pool: int) -> tuple[int, float, float]:
        s = closed_loop(engine="vllm", isl=8, osl=8, concurrency=4, cap=4, budget=64, num_prompts=12, warmup=4,
                        steady=True, pool=pool)  # fmt: skip
        t = timings(s, [1.0] * len(s.steps), 8)
        return s.preemptions, sum(t.tpot) / len(t.tpot), sorted(t.e2e)[len(t.e2e) // 2]

    tight, roomy = run(40), run(64)
    assert tight[0] > 0 and roomy[0] == 0
    assert tight[1] > roomy[1] and tight[2] > roomy[2]

"""kvplan.perf.sched: the closed loop as each engine's scheduler runs it, step by step (expected schedules derived
here from SGLang's Scheduler.get_next_batch_to_run and vLLM V1's Scheduler.schedule)."""

from __future__ import annotations

import pytest

from kvplan.perf.sched import Timings, _weighted_median, blend, closed_loop, timings, with_request_latency
from kvplan.perf.spec import Acceptance
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


def test_steady_state_staggers_the_clients_and_a_busy_vllm_sees_a_request_a_step_late() -> None:
    # aiperf --concurrency (AIConfigurator's generated benchmark: --warmup-request-count = concurrency, then the
    # measured rounds) measures after the first wave, when the clients have drifted apart. 2 clients, 10 + 3 tokens,
    # budget 100: one request alone takes ceil(10 / 100) + 3 - 1 = 3 steps, so client 1 starts 3 // 2 = 1 step in
    # (it sends after step 0). vLLM V1 takes new requests between steps (EngineCore.run_busy_loop): one sent after
    # step s while the engine is busy is scheduled at s + 2; an idle engine takes it at once (client 0 at step 0).
    # Scheduler.schedule: step 0 prefills r0 alone (not the 20-token burst); step 1 decodes r0; step 2 decodes r0
    # (its last token) and prefills r1; r0's client sends r2 after step 2, seen at step 4, and so on, each prefill
    # sharing a step with the other client's decode
    s = closed_loop(engine="vllm", isl=10, osl=3, concurrency=2, cap=2, budget=100, num_prompts=4, warmup=2,
                    steady=True)  # fmt: skip
    assert s.steps[0] == Batch(prefill_tokens=10, prefill_pairs=55, sampled=1)
    assert s.steps[1] == Batch(decode_requests=1, decode_context=11, sampled=1)
    assert s.steps[2] == Batch(prefill_tokens=10, prefill_pairs=55, decode_requests=1, decode_context=12, sampled=2)
    assert s.steps[3] == Batch(decode_requests=1, decode_context=11, sampled=1)
    # the clients send on past the 4 prompts (r4 after step 6) until the measured r2, r3 have finished (step 8)
    assert len(s.steps) == 9
    assert (s.arrived[:4], s.first[:4], s.finished[:4]) == ((-1, 0, 2, 4), (0, 2, 4, 6), (2, 4, 6, 8))
    assert list(s.measured_ids) == [2, 3]
    # prefill + decode steps of 1.5 s, decode-only steps of 0.5 s: r2 (sent after step 2) waits out step 3 and gets
    # its first token at step 4's end, TTFT 0.5 + 1.5 = 2.0 s; its two more tokens at steps 5, 6: TPOT 1.0 s
    t = timings(s, [1.0, 0.5, 1.5, 0.5, 1.5, 0.5, 1.5, 0.5, 1.5], osl=3)
    assert t.ttft == (2.0, 2.0) and t.tpot == (1.0, 1.0)


def test_steady_sglang_sees_a_request_two_steps_late_unless_idle_and_can_keep_waves() -> None:
    # one client: the engine is idle whenever the client sends, so each request starts at once (no turnaround):
    # r0 prefills at step 0, decodes at 1 (finishing, osl 2); r1 sent after step 1 is prefilled at step 2
    s = closed_loop(engine="sglang", isl=10, osl=2, concurrency=1, cap=1, budget=100, num_prompts=2, warmup=1,
                    steady=True)  # fmt: skip
    assert (s.arrived[:2], s.first[:2], s.finished[:2]) == ((-1, 1), (0, 2), (1, 3))
    assert timings(s, [1.0, 0.5, 1.0, 0.5], osl=2).ttft == (1.0,)
    # two clients, 10 + 5 tokens: a request alone takes 1 + 4 = 5 steps, client 1 sends after step 1 (5 // 2 - 1);
    # SGLang's overlap loop (Scheduler.event_loop_overlap) processes step s's results after launching s + 1, and
    # the next loop's recv_requests runs before the new request is back: it is seen at s + 3. r1 is sent after
    # step 1 and prefilled at step 4 (a prefill batch before decoding, get_next_batch_to_run), after r0's decodes
    # at steps 1, 2, 3
    s = closed_loop(engine="sglang", isl=10, osl=5, concurrency=2, cap=2, budget=100, num_prompts=2, warmup=0,
                    steady=True)  # fmt: skip
    assert s.arrived[:2] == (-1, 1) and s.first[:2] == (0, 4)
    assert [b.prefill_tokens for b in s.steps[:5]] == [10, 0, 0, 0, 10]
    # the same clients in waves (waves=True, sched.WAVES: SGLang can keep them): aiperf sends both at once and the
    # idle engine takes both at step 0, one prefill batch of 20 (budget 100); both decode at steps 1-4 and finish
    # at step 4; both clients send after step 4 and the idle engine takes the two together at step 5
    s = closed_loop(engine="sglang", isl=10, osl=5, concurrency=2, cap=2, budget=100, num_prompts=4, warmup=2,
                    steady=True, waves=True)  # fmt: skip
    assert (s.arrived[:4], s.first[:4], s.finished[:4]) == ((-1, -1, 4, 4), (0, 0, 5, 5), (4, 4, 9, 9))
    assert [b.prefill_tokens for b in s.steps[:6]] == [20, 0, 0, 0, 0, 20]
    # a wave over two chunks (budget 10): get_next_batch_to_run runs r1's prefill batch (step 1) before any decode,
    # so r0, whose first token came at step 0, waits and both decode at steps 2-5: the two finish together at step 5
    # and the next wave is a burst again (prefills at steps 6 and 7)
    s = closed_loop(engine="sglang", isl=10, osl=5, concurrency=2, cap=2, budget=10, num_prompts=4, warmup=2,
                    steady=True, waves=True)  # fmt: skip
    assert (s.first[:4], s.finished[:4]) == ((0, 1, 6, 7), (5, 5, 11, 11))
    assert [b.decode_requests for b in s.steps[:8]] == [0, 0, 2, 2, 2, 2, 0, 0]


def test_the_readme_case_prefills_one_request_at_a_time_once_steady() -> None:
    # Llama-3.1-70B on 4×H200 vLLM, 1K / 1K at concurrency 8 (AIConfigurator silicon_sample.csv: TTFT 101 ms
    # measured): in the burst every client's 1,024 tokens land in step 0 (8,192 = max_num_batched_tokens), which is
    # what priced TTFT at 998 ms. Staggered over a request's 1 + 1,023 steps, each measured request is prefilled
    # alone beside the other 7 clients' decodes, two steps after it was sent (the turnaround step, then its own)
    burst = closed_loop(engine="vllm", isl=1024, osl=1024, concurrency=8, cap=576, budget=8192, num_prompts=24)
    assert burst.steps[0].prefill_tokens == 8192
    s = closed_loop(engine="vllm", isl=1024, osl=1024, concurrency=8, cap=576, budget=8192, num_prompts=24, warmup=8,
                    steady=True)  # fmt: skip
    ids = s.measured_ids
    assert len(ids) == 16
    assert {(s.steps[s.first[i]].prefill_tokens, s.steps[s.first[i]].decode_requests) for i in ids} == {(1024, 7)}
    assert {s.first[i] - s.arrived[i] for i in ids} == {2}


def test_a_request_latency_outside_the_steps_adds_to_ttft_and_e2e_only() -> None:
    # the coefficients' request_us (the HTTP round trip, tokenizer, detokenizer: fitted) is paid once before the
    # first token: TTFT and end to end move by it, TPOT (tokens after the first) does not
    s = closed_loop(engine="sglang", isl=10, osl=2, concurrency=2, cap=1, budget=100, num_prompts=2)
    t = with_request_latency(timings(s, [1.0, 0.5, 1.0, 0.5], osl=2), 0.25)
    assert t.ttft == (1.25, 2.75) and t.tpot == (0.5, 0.5) and t.e2e == (1.75, 3.25) and t.duration == 3.25


def test_blend_mixes_each_quantile_by_the_wave_share() -> None:
    # a quarter of the clients in waves: each sorted figure is 0.75 × the spread loop's + 0.25 × the waves' (TTFT
    # 1, 3 spread and 5, 9 in waves: 0.75 + 1.25 = 2.0 and 2.25 + 2.25 = 4.5); share 0 is the spread loop itself
    spread = Timings(ttft=(3.0, 1.0), tpot=(1.0, 1.0), e2e=(4.0, 2.0), duration=10.0, itl_median=1.0)
    waves = Timings(ttft=(5.0, 9.0), tpot=(2.0, 2.0), e2e=(6.0, 10.0), duration=14.0, itl_median=2.0)
    t = blend(spread, waves, 0.25)
    assert t.ttft == (2.0, 4.5) and t.tpot == (1.25, 1.25) and t.e2e == (3.0, 5.5)
    assert (t.duration, t.itl_median) == (11.0, 1.25)
    assert blend(spread, waves, 0.0) is spread


def test_a_lone_decode_steps_gap_runs_from_its_prefills_end() -> None:
    # one request of 10 + 2 tokens: step 0 prefills it (1 s, its first token), step 1 decodes its second (0.5 s):
    # the one gap is step 1's end less step 0's, 0.5 s
    s = closed_loop(engine="sglang", isl=10, osl=2, concurrency=1, cap=1, budget=100, num_prompts=1)
    assert timings(s, [1.0, 0.5], osl=2).itl_median == 0.5


def test_a_request_as_large_as_the_pool_runs_and_a_larger_one_is_refused() -> None:
    # 10 + 2 tokens in a pool of 12 fit exactly (closed_loop refuses only a request larger than the whole pool)
    s = closed_loop(engine="vllm", isl=10, osl=2, concurrency=1, cap=1, budget=100, num_prompts=1, pool=12)
    assert (s.first, s.finished) == ((0,), (1,))
    with pytest.raises(ValueError, match="larger than the whole pool"):
        closed_loop(engine="vllm", isl=10, osl=2, concurrency=1, cap=1, budget=100, num_prompts=1, pool=11)


def test_steady_clients_start_spread_over_one_requests_steps() -> None:
    # 10 + 5 tokens at a budget of 100: one request alone takes 1 prefill + 4 decode steps = 5; 5 clients start
    # after steps i × 5 // 5 - 1 = -1, 0, 1, 2, 3 (the first at once)
    s = closed_loop(engine="vllm", isl=10, osl=5, concurrency=5, cap=5, budget=100, num_prompts=10, warmup=5,
                    steady=True)  # fmt: skip
    assert s.arrived[:5] == (-1, 0, 1, 2, 3)


def test_a_burst_loop_sees_a_resent_request_at_the_next_step() -> None:
    # the vLLM schedule above with a third prompt: r0 finishes at step 2, its client sends again at once and the busy
    # engine (r1 still decoding) takes it at step 3: outside the steady state no turnaround is modelled
    s = closed_loop(engine="vllm", isl=10, osl=3, concurrency=2, cap=2, budget=12, num_prompts=3)
    assert (s.arrived, s.first) == ((-1, -1, 2), (0, 1, 3))


def test_speculative_steps_set_the_clients_spread() -> None:
    # acceptance 1.5 tokens a step: 10 + 5 tokens take 1 prefill + ceil(4 / 1.5) = 3 decode steps = 4 (the first
    # token comes from the prefill); 5 clients start after steps i × 4 // 5 - 1 = -1, -1, 0, 1, 2
    spec = Acceptance(verify_tokens=3, milli=1500, low_milli=1500, high_milli=1500, source="given")
    s = closed_loop(engine="vllm", isl=10, osl=5, concurrency=5, cap=5, budget=100, num_prompts=10, warmup=5,
                    steady=True, spec=spec)  # fmt: skip
    assert s.arrived[:5] == (-1, -1, 0, 1, 2)


def test_one_output_token_has_no_tpot() -> None:
    # osl 1: the prefill's token is the only one; TPOT (tokens after the first) is 0, not a division by zero
    s = closed_loop(engine="sglang", isl=10, osl=1, concurrency=1, cap=1, budget=100, num_prompts=1)
    t = timings(s, [1.0], osl=1)
    assert (t.ttft, t.tpot, t.e2e) == ((1.0,), (0.0,), (1.0,))


def test_the_itl_median_is_the_lower_weighted_median() -> None:
    # weights 1 and 2 (tokens): half is 1.5; the first gap's 1 token is below it, so the median is the second's
    assert _weighted_median([(1.0, 1), (2.0, 2)]) == 2.0
    assert _weighted_median([(1.0, 2), (2.0, 2)]) == 1.0 and _weighted_median([]) == 0.0

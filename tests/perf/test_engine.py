"""kvplan.perf.engine: admission and preemption under a KV pool, the expected schedules derived here by hand from
vLLM V1's Scheduler.schedule (running first, ``self.running.pop()`` then ``_preempt_request`` when
``allocate_slots`` fails, no waiting admitted in a step that preempted) and SGLang's ``PrefillAdder.add_one_req`` /
``Scheduler.update_running_batch`` → ``ScheduleBatch.retract_decode``."""

from __future__ import annotations

import pytest

from kvplan.perf.sched import Schedule, closed_loop, timings
from kvplan.perf.step import Batch

PRESSURE_LOADS = [(300, 5000, 6, 12_000, 0), (64, 900, 12, 4_000, 0), (500, 6000, 8, 20_000, 2_600),
                  (10, 4200, 5, 9_000, 1_700)]  # fmt: skip
"""SGLang loads under pool pressure (clients waiting on the reservations, retractions), outputs past the 4,096 clip,
with and without an acceptance length (‰): (isl, osl, clients, pool, accept)."""


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
    # 2 clients of 2 + 5,000 tokens, pool 8,000. PrefillAdder.add_one_req counts a new request's input and its output
    # clipped at 4,096 whole, a running one's clipped output left × new_token_ratio. Step 0: r0 needs 2 + 4,096 =
    # 4,098 of 8,000 (admitted); r1 needs 4,098 of 7,998 − r0's 4,096 (same batch, whole) = 3,902: it waits. Step 1:
    # r1 needs 4,098 of 7,997 − min(4,999, 4,096) × 0.7 = 5,129.8: admitted, prefilled alone (a prefill batch), the
    # context 3 + 3. Decode j of both (steps 1 + j) needs 2 free of 8,000 − 6 − 2 (j − 1): j ≤ 3,997 fit; at step
    # 3,999 (j = 3,998) nothing is free: retract_decode takes r1 (both 3,998 out, the later last in the stable order),
    # freeing its 4,000, and resets the ratio to min(1, (3,998 + 20 × 1) / 5,000) = 0.8036. r1 then needs 2 + 3,998
    # + min(1,002, 4,096) = 5,002 while r0 runs (7,998 − o − (5,000 − o) × ~0.8 with o ≥ 3,999 out: at most ~3,200):
    # it waits until r0 finishes (its 4,999th decode, step 5,000), is prefilled again over 4,000 tokens in 40 chunks
    # of 100 (steps 5,001-5,040, its 3,999th token) and decodes its last 1,001 (steps 5,041-6,041)
    s = closed_loop(engine="sglang", isl=2, osl=5000, concurrency=2, cap=2, budget=100, num_prompts=2, pool=8000)
    assert s.steps[0] == s.steps[1] == Batch(prefill_tokens=2, prefill_pairs=3, sampled=1)
    assert s.steps[2] == Batch(decode_requests=2, decode_context=6, sampled=2)
    assert s.steps[3998] == Batch(decode_requests=2, decode_context=6 + 2 * 3996, sampled=2)
    assert s.steps[3999] == Batch(decode_requests=1, decode_context=4000, sampled=1)
    assert s.steps[5001] == Batch(prefill_tokens=100, prefill_pairs=100 * 101 // 2)
    assert (s.first, s.finished, s.preemptions, len(s.steps)) == ((0, 1), (5000, 6041), 1, 6042)
    free = closed_loop(engine="sglang", isl=2, osl=5000, concurrency=2, cap=2, budget=100, num_prompts=2)
    assert (free.finished, free.preemptions) == ((4999, 4999), 0)


def test_sglang_reserves_the_output_so_it_admits_fewer_than_vllm() -> None:
    # 4 + 4 tokens, pool 12: r0 needs 4 + 4 = 8 (admitted); r1 8 of 12 − 4 − r0's 4 (same batch, whole) = 4, then
    # of 12 − 5 − 3 × 0.7 = 4.9 while r0 decodes: SGLang runs one at a time and never retracts; vLLM admits both
    # (above) and preempts
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


@pytest.mark.parametrize(("isl", "osl", "clients", "pool", "accept"), PRESSURE_LOADS)
def test_sglang_admission_on_the_reservations_lower_bound_is_exact(
    isl: int, osl: int, clients: int, pool: int, accept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Engine._admits decides on the running reservations as kvplan.perf.reserve keeps them (their sum without
    # speculative decoding, a lower bound with it) and Engine._coast runs the decode steps in which the queue's head
    # stays refused at once: the schedule must be the one summing them afresh at every step, one step at a time,
    # gives. Loads under pool pressure (clients waiting on the reservations, SGLang's retractions), outputs past the
    # 4,096 clip, with and without an acceptance length
    from kvplan.perf import engine

    spec = _spec(accept)

    def run() -> object:
        return closed_loop(engine="sglang", isl=isl, osl=osl, concurrency=clients, cap=clients, budget=512,
                           num_prompts=2 * clients, spec=spec, pool=pool)  # fmt: skip

    bounded = run()
    monkeypatch.setattr(engine.Engine, "_theirs_at_least", lambda self: (0, False))
    monkeypatch.setattr(engine.Engine, "_coast", lambda self, until: 0)
    assert _stepwise(run()) == _stepwise(bounded)


@pytest.mark.parametrize(
    ("isl", "osl", "clients", "pool", "accept"),
    [(300, 5000, 6, 12_000, 0), (64, 900, 12, 4_000, 0), (300, 5000, 6, 12_000, 2_600)],
)
def test_sglang_retracts_in_retract_decodes_order(
    isl: int, osl: int, clients: int, pool: int, accept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ScheduleBatch.retract_decode sorts the decoding requests by (output tokens, −input) descending (a stable sort)
    # and retracts from its end, then resets the ratio from their outputs and osl: Engine._retract takes that end's
    # request from a heap kept in that order (without speculative decoding, whose outputs keep their order as the
    # steps run) or a scan (with it), and the ratio from sums kept as requests start and stop decoding; the
    # schedules (steps, retractions) must be those of the sort and the sums taken afresh
    from kvplan.perf import engine
    from kvplan.perf.engine import RETRACT_DECODE_STEPS

    def by_sort(self: engine.Engine) -> None:
        order = sorted((q for q in self.running.values() if q.start >= 0),
                       key=lambda q: (self._output(q), -q.isl), reverse=True)  # fmt: skip
        while len(order) > 1 and self.free() < len(order) * self.width:
            self._evict(order.pop())
        left = [q for q in self.running.values() if q.start >= 0]
        made, total = sum(self._output(q) for q in left), sum(q.osl for q in left)
        self.ratio = min(1000, (made + RETRACT_DECODE_STEPS * len(left)) * 1000 / max(total, 1))

    def run() -> object:
        return closed_loop(engine="sglang", isl=isl, osl=osl, concurrency=clients, cap=clients, budget=512,
                           num_prompts=2 * clients, spec=_spec(accept), pool=pool)  # fmt: skip

    got = run()
    assert got.preemptions > 0  # the loads retract
    monkeypatch.setattr(engine.Engine, "_retract", by_sort)
    assert _stepwise(run()) == _stepwise(got)


def _stepwise(s: Schedule) -> tuple[object, ...]:
    """A schedule step by step: where the engine ran decode steps as one run (Batch.repeat) does not matter."""
    return s.steps, s.arrived, s.first, s.finished, s.peak_running, s.preemptions


def _spec(accept: int) -> object:
    """An acceptance length of accept / 1000 tokens a step over 4 verified (None: no speculative decoding)."""
    from kvplan.perf.spec import Acceptance

    return (
        Acceptance(verify_tokens=4, milli=accept, low_milli=accept, high_milli=accept, source="t") if accept else None
    )


def _engine(pool: int, accept: int = 0) -> object:
    from kvplan.perf.engine import Engine
    from kvplan.perf.spec import Acceptance

    spec = None
    if accept:
        spec = Acceptance(verify_tokens=4, milli=accept, low_milli=accept, high_milli=accept, source="t")
    return Engine(engine="sglang", isl=10, osl=10, cap=8, budget=100, pool=pool, load=None, stop_at=0, spec=spec)  # type: ignore[arg-type]


def test_retract_decode_takes_the_fewest_outputs_and_resets_the_ratio_exactly() -> None:
    # three decoding requests (outputs 4, 2, 2 since their start; the two of 2 tie and the later admitted goes first,
    # a stable descending sort's last), 4 tokens verified a step (MTP): the step needs 3 × 4 = 12 free, the pool
    # leaves 40 − 32 = 8; one retraction frees its 10 + 1 tokens and leaves 2 × 4 = 8 ≤ 19. The ratio is reset to
    # (outputs made + 20 × requests left) / their outputs asked, in ‰: (4 + 2 + 40) × 1000 / (100 + 101) = 228.86
    # (SGLang retract_decode: new_token_ratio = (decoded + retract_decode_steps × n) / Σ max_new_tokens)
    from kvplan.perf.sched import _Req

    e = _engine(pool=40, accept=1000)
    for rid, out, osl in ((0, 4, 100), (1, 2, 101), (2, 2, 100)):
        e.running[rid] = _Req(rid, isl=10, osl=osl, out=out, fill=10, start=0)
    e.context = 32
    e._retract()
    assert sorted(e.running) == [0, 1] and e.preemptions == 1 and e.context == 32 - 11
    assert e.ratio == (4 + 2 + 20 * 2) * 1000 / 201
    # and the requests left are summed as PrefillAdder would next: (100 − 4) + (101 − 2) = 195, the sum itself
    assert e._theirs_at_least() == (195, True)


def test_vllm_fills_the_last_token_of_its_budget_and_a_chunk_that_fits_the_pool_exactly() -> None:
    # vLLM V1 (Scheduler.schedule): decodes first, then prefill tokens while any budget is left. 3 clients of 2 + 5,
    # budget 3: step 0 prefills r0 (2) and 1 of r1; step 1 decodes r0, r1's last token and 1 of r2; step 2 decodes
    # r0 and r1 and spends the budget's last token on r2's
    s = closed_loop(engine="vllm", isl=2, osl=5, concurrency=3, cap=3, budget=3, num_prompts=3)
    assert [(b.prefill_tokens, b.decode_requests) for b in s.steps[:3]] == [(3, 0), (2, 1), (1, 2)]
    # allocate_slots fails only past the free blocks: 2 clients of 4 + 2, pool 8: r1's 4 prompt tokens fit the 4
    # left after r0's, exactly; both are prefilled in step 0 (preempted only later, as their decodes grow)
    t = closed_loop(engine="vllm", isl=4, osl=2, concurrency=2, cap=2, budget=100, num_prompts=2, pool=8)
    assert t.steps[0].prefill_tokens == 8 and t.first[:2] == (0, 0)


@pytest.mark.parametrize(("isl", "osl", "clients", "pool", "accept"), PRESSURE_LOADS)
def test_the_reservations_bound_is_never_above_their_sum_and_is_it_where_it_says(
    isl: int, osl: int, clients: int, pool: int, accept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # at every admission check, the sum PrefillAdder takes (each decoding request's min(osl − output, 4096)) against
    # Engine._theirs_at_least (kvplan.perf.reserve): never above it, equal where it says it is the sum
    from kvplan.perf import engine
    from kvplan.perf.reserve import CLIP_MAX_NEW_TOKENS

    checked = {True: 0, False: 0}
    bound = engine.Engine._theirs_at_least

    def checking(self: engine.Engine) -> tuple[int, bool]:
        got, exact = bound(self)
        total = sum(min(q.osl - self._output(q), CLIP_MAX_NEW_TOKENS) for q in self.running.values() if q.start >= 0)
        assert got <= total and (got == total or not exact)
        checked[exact] += 1
        return got, exact

    monkeypatch.setattr(engine.Engine, "_theirs_at_least", checking)
    spec = _spec(accept)
    closed_loop(engine="sglang", isl=isl, osl=osl, concurrency=clients, cap=clients, budget=512,
                num_prompts=3 * clients, warmup=clients, steady=True, spec=spec, pool=pool)  # fmt: skip
    assert checked[True] > 0 and (accept > 0 or checked[False] == 0)


@pytest.mark.parametrize("engine_name", ["sglang", "vllm"])
@pytest.mark.parametrize(
    ("isl", "osl", "clients", "pool", "accept"),
    [(300, 5000, 6, 12_000, 0), (64, 900, 12, 4_000, 0), (500, 3000, 8, 0, 0), (500, 6000, 8, 20_000, 2_600)],
)
def test_decode_steps_run_at_once_give_the_schedule_of_one_at_a_time(
    engine_name: str, isl: int, osl: int, clients: int, pool: int, accept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Engine._coast runs the decode steps in which nothing is seen, admitted, finished or retracted at once (a run,
    # Batch.repeat, without speculative decoding): step by step, the schedule must be the one of run()'s own steps
    from kvplan.perf import engine

    spec = _spec(accept)

    def run() -> Schedule:
        return closed_loop(engine=engine_name, isl=isl, osl=osl, concurrency=clients, cap=clients, budget=512,
                           num_prompts=3 * clients, warmup=clients, steady=True, spec=spec, pool=pool)  # fmt: skip

    coasted = run()
    assert max(b.repeat for b in coasted.runs) > (1 if spec is None else 0)  # runs where they can be
    assert len(coasted.runs) < len(coasted.steps) or spec is not None
    monkeypatch.setattr(engine.Engine, "_coast", lambda self, until: 0)
    assert _stepwise(run()) == _stepwise(coasted)


def test_a_lone_request_decodes_in_one_run_through_its_last_step() -> None:
    # one client of 10 + 100 tokens, no pool: step 0 prefills (10 × 11 / 2 = 55 pairs, the first token sampled),
    # then its 99 decode steps run at once, the last the one it finishes in (Engine._coast: up to the step a request
    # finishes in), over contexts 11, 12, … 109
    s = closed_loop(engine="sglang", isl=10, osl=100, concurrency=1, cap=1, budget=100, num_prompts=1)
    assert s.runs == (Batch(prefill_tokens=10, prefill_pairs=55, sampled=1),
                      Batch(decode_requests=1, decode_context=11, sampled=1, repeat=99))  # fmt: skip
    assert (s.first, s.finished) == ((0,), (99,))


@pytest.mark.parametrize(("free", "n", "grown", "accept", "width", "steps"),
                         [(21, 3, 0, 0, 1, 7), (20, 3, 0, 0, 1, 6), (3, 3, 0, 0, 1, 1), (2, 3, 0, 0, 1, 0),
                          (30, 2, 500, 2600, 4, 5)])  # fmt: skip
def test_the_steps_the_pool_holds(free: int, n: int, grown: int, accept: int, width: int, steps: int) -> None:
    # Engine._holds: each step of n requests needs n × width free tokens (SGLang check_decode_mem, vLLM
    # allocate_slots). 21 free, 3 requests: free after j steps 21 − 3j ≥ 3 for j = 0 … 6: 7 steps; 20 free: j ≤ 5,
    # 6; exactly 3 free: one step; 2: none. With 2.6 tokens accepted a step (4 verified), 500 thousandths carried:
    # the context grows floor((500 + 5,200 j) / 1000) after j steps, and 30 − 8 = 22 must stay free of it: 21 at
    # j = 4, 26 at j = 5: 5 steps
    e = _engine(pool=1_000, accept=accept)
    e.width, e.grown, e.context = width, grown, 1_000 - free  # type: ignore[attr-defined]
    assert e._holds(n) == steps  # type: ignore[attr-defined]


@pytest.mark.parametrize(("left_b", "steps"), [(6000, 6), (4100, 6)])
def test_sglang_admits_the_queue_head_the_first_step_its_reservation_fits(left_b: int, steps: int) -> None:
    # two decoding requests of 6,000 and left_b outputs left (each reserving min(left, 4,096): 8,192), 7,700 free,
    # reserved whole 10,000 (no admission on the upper bound), the ratio at its start 700 ‰, falling 602 / 600 a step;
    # the head needs 1,000 + min(1,000, 4,096) = 2,000 (PrefillAdder.add_one_req). After j steps: free 7,700 − 2j,
    # the reservations 8,192 less what has fallen (4,100 left: falling after 4 tokens), × the ratio:
    # j = 5: 7,690 − 8,192 × 0.694983 = 1,996.7 (4,100 left: 8,191 × 0.694983 → 1,997.4), refused;
    # j = 6: 7,688 − 8,192 × 0.693980 = 2,002.9 (8,190 → 2,004.3): admitted after 6 steps either way
    from kvplan.perf.sched import _Req

    e = _engine(pool=20_000)
    e.context, e.reserved = 20_000 - 7_700, 10_000  # type: ignore[attr-defined]
    e.theirs.add(0, 6000)  # type: ignore[attr-defined]
    e.theirs.add(0, left_b)  # type: ignore[attr-defined]
    head = _Req(9, isl=1000, osl=1000)
    assert e._refused_for(head, 2, 100) == steps  # type: ignore[attr-defined]
    assert e._refused_for(head, 2, 4) == 4  # type: ignore[attr-defined]


def test_sglang_decodes_when_the_pool_holds_the_step_exactly() -> None:
    # check_decode_mem: a decode of n requests needs n free tokens; with exactly n free it runs, with one fewer the
    # request retract_decode puts last is retracted (SGLang's fewest outputs first; here both made 1, the later
    # admitted goes)
    from kvplan.perf.sched import _Req

    for free, retracted in ((2, 0), (1, 1)):
        e = _engine(pool=1_000)
        for rid in (0, 1):
            r = _Req(rid, isl=10, osl=10, out=1, fill=10, start=0, seq=rid)
            e.running[rid] = r  # type: ignore[attr-defined]
            e._starts_decoding(r)  # type: ignore[attr-defined]
        e.context = 1_000 - free  # type: ignore[attr-defined]
        assert e._sglang_step() == (0, 0, [], 2 - retracted)  # type: ignore[attr-defined]
        assert e.preemptions == retracted and (retracted == 0 or list(e.running) == [0])  # type: ignore[attr-defined]
        if not retracted:  # a decode that fits lowers the ratio by (0.7 − 0.098) / 600, in ‰
            assert e.ratio == 700 - (700 - 98) / 600  # type: ignore[attr-defined]


def test_sglang_retraction_resets_the_ratio_from_the_outputs_made() -> None:
    # no speculative decoding: three requests of 10 + 101, 100, 100 tokens admitted in the order r1, r2, r0, each
    # 1 output at its prefill, starting to decode at counts 2, 2, 0; at count 4 they have made 3, 3, 5. Pool 40
    # with 38 held: 2 free for 3 decodes; retract_decode takes the last of the sort by (outputs, −input)
    # descending: r2 (3 made, admitted after r1; r0, admitted last, made more), freeing its 10 + 3 = 13 tokens: 15
    # free, enough for 2. The ratio: (5 + 3 + 20 × 2) × 1000 / (100 + 101)
    from kvplan.perf.sched import _Req

    e = _engine(pool=40)
    for seq, (rid, osl, start) in enumerate(((1, 101, 2), (2, 100, 2), (0, 100, 0))):
        r = _Req(rid, isl=10, osl=osl, out=1, fill=10, seq=seq)
        e.running[rid] = r  # type: ignore[attr-defined]
        e.decode_count = start  # type: ignore[attr-defined]
        e._starts_decoding(r)  # type: ignore[attr-defined]
    e.decode_count, e.context = 4, 38  # type: ignore[attr-defined]
    e._retract()  # type: ignore[attr-defined]
    assert list(e.running) == [1, 0] and e.context == 38 - 13  # type: ignore[attr-defined]
    assert e.ratio == (5 + 3 + 20 * 2) * 1000 / 201  # type: ignore[attr-defined]


def test_with_speculative_decoding_the_last_decoding_request_is_never_retracted() -> None:
    # retract_decode keeps one request even when its 4 verified tokens do not fit (it is retracted no further)
    from kvplan.perf.sched import _Req

    e = _engine(pool=40, accept=2600)
    e.running[0] = _Req(0, isl=10, osl=100, out=1, fill=10, start=0)  # type: ignore[attr-defined]
    e.context = 38  # type: ignore[attr-defined]
    e._retract()  # type: ignore[attr-defined]
    assert list(e.running) == [0] and e.preemptions == 0  # type: ignore[attr-defined]
    # two, 8 tokens verified and 2 free: one goes (the later admitted of two equals), the other stays
    two = _engine(pool=40, accept=2600)
    for rid in (0, 1):
        two.running[rid] = _Req(rid, isl=10, osl=100, out=1, fill=10, start=0)  # type: ignore[attr-defined]
    two.context = 38  # type: ignore[attr-defined]
    two._retract()  # type: ignore[attr-defined]
    assert list(two.running) == [0] and two.preemptions == 1  # type: ignore[attr-defined]


def test_the_loop_runs_until_every_measured_request_has_finished() -> None:
    # SGLang puts a retracted request back at the queue's end, so requests sent later can finish before it: 12
    # clients of 64 + 900 under a 4,000-token pool, 36 measured; request 36 (the first past them) finishes before
    # requests 33 and 34, and the loop still runs until both have finished (Engine.unfinished counts only the first
    # stop_at requests)
    s = closed_loop(engine="sglang", isl=64, osl=900, concurrency=12, cap=12, budget=512, num_prompts=36, warmup=12,
                    steady=True, pool=4_000)  # fmt: skip
    assert s.finished[36] < s.finished[33] and all(s.finished[i] >= 0 for i in range(36))


def test_a_run_goes_on_across_coasts_of_the_same_requests() -> None:
    # one request decoding, a run of 5 steps from context 100 recorded: coasting 3 more steps from context 105 (the
    # next step of the same run) extends it to 8; from a context the run did not reach (another request's tokens
    # held) a new run starts
    from kvplan.perf.sched import _Req

    for context, runs in ((105, [(100, 8)]), (205, [(100, 5), (205, 3)])):
        e = _engine(pool=0)
        r = _Req(0, isl=10, osl=1000, out=1, fill=10, start=0)
        e.running[0] = r  # type: ignore[attr-defined]
        e.decoding = [(900, 0, 0)]  # type: ignore[attr-defined]
        e.steps = [Batch(decode_requests=1, decode_context=100, sampled=1, repeat=5)]  # type: ignore[attr-defined]
        e.step, e.decode_count, e.context = 5, 5, context  # type: ignore[attr-defined]
        assert e._coast(8) == 3  # type: ignore[attr-defined]
        assert [(b.decode_context, b.repeat) for b in e.steps] == runs  # type: ignore[attr-defined]

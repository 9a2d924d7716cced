"""The engine's step loop under a KV pool of ``pool`` tokens: which batch each step runs, who is admitted, and who is
preempted when the running set's growth does not fit (kvplan.perf.sched's policies, here with the pool's side).

- vLLM V1 (``Scheduler.schedule``): running requests first; when a request's tokens do not fit
  (``KVCacheManager.allocate_slots``) the newest running request is preempted (``self.running.pop()``,
  ``_preempt_request``: blocks freed, ``num_computed_tokens = 0``, back to the front of the waiting queue); a waiting
  request is admitted while fewer than ``max_num_seqs`` run and its chunk fits, never in a step that preempted.
- SGLang (``PrefillAdder.add_one_req``): admitted while input + min(max_new_tokens − output, 4096) is below the
  pool's free tokens less each running request's own clipped output left × new_token_ratio and the whole reservation
  of those admitted in the same batch; a decode that does not fit (``check_decode_mem``) retracts
  (``update_running_batch`` → ``retract_decode``); the ratio's rules at ``INIT_RATIO_MILLI`` and ``_retract``.
A preempted or retracted request keeps its output and is prefilled again over input + output (recompute): vLLM past
what its prefix cache still holds (``_hit``), SGLang in full (``retract_decode`` releases without inserting into the
radix tree); its first token counts once. ``pool`` 0: no pool (the count cap alone). Decode steps that change only
lengths run at once (``_coast``, ``Batch.repeat``); SGLang's reservations are kept as counts (kvplan.perf.reserve).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.perf.reserve import CLIP_MAX_NEW_TOKENS, Reservations
from kvplan.perf.spec import Acceptance, steps_for
from kvplan.perf.step import Batch, chunk_pairs

if TYPE_CHECKING:
    from kvplan.perf.sched import Load, _Req

INIT_RATIO_MILLI, MIN_RATIO_MILLI, DECAY_STEPS = 700, 98, 600
"""SGLang's new_token_ratio (thousandths; ``Scheduler.__init__``): SGLANG_INIT_NEW_TOKEN_RATIO 0.7 at start, down by
(0.7 − 0.7 × SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600 each decode step that
fits, reset after a retraction (``_retract``). Retracted requests go back to the queue's end
(``_extend_requests_to_queue``); the victims: fewest output tokens, then the longest input."""
RETRACT_DECODE_STEPS = 20
"""SGLang global_config.retract_decode_steps: decode steps the ratio reset assumes for each request left running."""


def _decayed(ratio: float) -> float:
    return max(ratio - (INIT_RATIO_MILLI - MIN_RATIO_MILLI) / DECAY_STEPS, MIN_RATIO_MILLI)


@dataclass(frozen=True, kw_only=True)
class Stepped:
    steps: list[Batch]
    peak_running: int
    preemptions: int
    """vLLM's preemptions or SGLang's retractions, each request each time."""


class Engine:
    """One run of the engine's policy over a load (kvplan.perf.sched.Load); ``run`` steps it to the end."""

    def __init__(self, *, engine: str, isl: int, osl: int, cap: int, budget: int, pool: int, load: Load,
                 stop_at: int, spec: Acceptance | None) -> None:  # fmt: skip
        self.mixed = engine == "vllm"
        self.isl, self.osl, self.cap, self.budget, self.pool = isl, osl, cap, budget, pool
        self.load, self.stop_at, self.spec = load, stop_at, spec
        self.width = spec.verify_tokens if spec else 1
        self.accept = spec.milli if spec else 1000
        self.waiting: deque[_Req] = deque()
        self.running: dict[int, _Req] = {}  # admission order: prefilling and decoding
        self.prefilling: list[_Req] = []
        self.decoding: list[tuple[int, int, int]] = []  # heap of (decode count at which it finishes, rid, epoch)
        self.decode_count = self.context = self.grown = self.filled = self.reserved = 0
        self.ratio: float = INIT_RATIO_MILLI
        self.preempted_now = False
        self.batch: list[_Req] = []
        """Admitted in this step: SGLang counts their output whole (``_update_prefill_budget``)."""
        self.steps: list[Batch] = []
        """The steps run, a run of decode steps as one (``Batch.repeat``)."""
        self.step = 0
        """Steps run so far: the index of the next."""
        self.peak = self.preemptions = self.admitted = 0
        self.theirs = Reservations(accept=self.accept)
        """SGLang: the decoding requests' reservations, counted as they start and stop (kvplan.perf.reserve)."""
        self.victims: list[tuple[int, int, int, int, int]] = []
        """SGLang without speculative decoding: a heap of the decoding requests in retract_decode's order
        (``_retract``): (output − decode count, −input, −admission order, rid, epoch); stale entries skipped."""
        self.osl_decoding = self.made_less_start = 0
        """Σ osl and Σ (output − decode count) over the decoding requests without speculative decoding: their
        outputs sum to the latter + decode count × their number (the ratio's reset)."""
        self.unfinished = stop_at

    def run(self) -> Stepped:
        """Step the engine's policy until every request (the first ``stop_at``, when given) has finished."""
        while self.step < 10_000_000:
            idle = not (self.waiting or self.running)
            for r in self.load.seen(self.steps, self.step, idle=idle):
                r.isl, r.osl = r.isl or self.isl, r.osl or self.osl
                self.waiting.append(r)
            if not (self.waiting or self.running):
                break
            self.preempted_now = False
            self.batch.clear()
            if not self._coast(self.load.quiet_until(self.step)):
                tokens, pairs, done_now, n_dec = self._vllm_step() if self.mixed else self._sglang_step()
                if not (tokens or n_dec):
                    raise ValueError("the pool cannot hold the next request's step even alone")
                self.peak = max(self.peak, len(self.running))
                self._record(tokens, pairs, n_dec, len(done_now))
                self._advance(n_dec, done_now)
            if self.stop_at and self.unfinished == 0:
                break
        return Stepped(steps=self.steps, peak_running=self.peak, preemptions=self.preemptions)

    def _record(self, tokens: int, pairs: int, n_dec: int, first_tokens: int) -> None:
        self.step += 1
        self.steps.append(Batch(prefill_tokens=tokens, prefill_pairs=pairs, decode_requests=n_dec,
                                decode_context=self.context if n_dec else 0, sampled=n_dec * self.width + first_tokens,
                                verify_tokens=self.width if n_dec else 1,
                                draft_tokens=self.width if self.spec and n_dec else 0))  # fmt: skip

    def _coast(self, until: int) -> int:
        """Run at once the decode steps that change nothing but the running requests' lengths, as ``run`` would one
        at a time: before step ``until`` (the load's next request), up to the step a request finishes in, while the
        pool holds each step and the queue's head is refused (``_refused_for``). How many."""
        n = self._n_decoding()
        if self.prefilling or not n or until <= self.step:
            return 0
        k = min(until - self.step, self.decoding[0][0] - self.decode_count, self._holds(n))
        head = self.waiting[0] if self.waiting and len(self.running) < self.cap else None
        if head is not None and k > 0:
            if self.spec and not self.mixed:  # its reservations fall by what each step accepted: one at a time
                j = 0
                while j < k and self._decided(head, self.budget) is False:
                    self._decay()
                    self._record(0, 0, n, 0)
                    self._advance(n, [])
                    j += 1
                return j
            k = self._refused_for(head, n, k)
        if k <= 0:
            return 0
        if not self.mixed:
            self._decay(k)
        if self.spec:  # its steps grow the context by what each accepted: one at a time
            for _ in range(k):
                self._record(0, 0, n, 0)
                self._advance(n, [])
            return k
        last = self.steps[-1] if self.steps else None
        if (
            last
            and not last.prefill_tokens
            and last.decode_requests == n
            and (last.decode_context + last.repeat * n == self.context)
        ):  # the same requests, one token longer each step: the run goes on
            self.steps[-1] = replace(last, repeat=last.repeat + k)
        else:
            self.steps.append(Batch(decode_requests=n, decode_context=self.context, sampled=n, repeat=k))
        self.step += k
        self._grow(n, k - 1)
        self._advance(n, [])  # the last step: whoever finishes in it
        return k

    def _holds(self, n: int) -> int:
        """Decode steps of ``n`` requests the pool holds from now (each needs n × width free tokens; the context
        grows by what each step accepted: floor((grown + j × n × accept) / 1000) after j)."""
        room = self.free() - n * self.width
        return ((room + 1) * 1000 - self.grown - 1) // (n * self.accept) + 1 if room >= 0 else 0

    def _refused_for(self, head: _Req, n: int, k: int) -> int:
        """Of the next ``k`` decode steps (without speculative decoding on SGLang), how many run before ``head``
        would be admitted. vLLM: its chunk fits no better as the pool fills (``_decided``), so all or none. SGLang:
        admitted once input + output left is below the free tokens less the reservations × the ratio, which all
        fall as the steps run: each step's figures as ``_decided`` takes them, from the reservations' trend."""
        if self.mixed:
            room = self.budget - n * self.width
            return k if room <= 0 or self._decided(head, room) is False else 0
        need = head.isl + head.out + min(head.osl - head.out, CLIP_MAX_NEW_TOKENS)
        free = self.free()
        if need < free - self.reserved:  # admitted now; free only falls
            return 0
        ratio, dc = self.ratio, self.decode_count
        total, falls, steady = self.theirs.trend(dc)
        since = 0
        for j in range(k):
            if j - since > steady:  # another term starts to fall
                total, falls, steady = self.theirs.trend(dc + j)
                since = j
            if need < free - j * n - (total - falls * (j - since)) * ratio / 1000:
                return j
            if ratio != MIN_RATIO_MILLI:  # at its floor it stays
                ratio = _decayed(ratio)
        return k

    # ------------------------------------------------------------------ the two policies

    def _vllm_step(self) -> tuple[int, int, list[_Req], int]:
        """Every running request decodes, the newest preempted while their tokens do not fit; then prefill tokens
        up to the budget."""
        n_dec = self._n_decoding()
        while self.pool and n_dec and self.free() < n_dec * self.width:
            self._evict(next(reversed(self.running.values())))
            n_dec = self._n_decoding()
        return (*self._fill(self.budget - n_dec * self.width), n_dec)

    def _sglang_step(self) -> tuple[int, int, list[_Req], int]:
        """A prefill batch when one can be formed, else a decode step of every running request, retracting while
        its tokens do not fit."""
        if self.prefilling or (self.waiting and len(self.running) < self.cap):
            tokens, pairs, done_now = self._fill(self.budget)
            if tokens:
                return tokens, pairs, done_now, 0
        n_dec = self._n_decoding()
        if self.pool and self.free() < n_dec * self.width:
            self._retract()
            n_dec = self._n_decoding()
        else:
            self._decay()
        return 0, 0, [], n_dec

    def _decay(self, steps: int = 1) -> None:
        """SGLang: each decode step that fits lowers the new-token ratio towards its floor."""
        for _ in range(steps):
            if self.ratio == MIN_RATIO_MILLI:
                break
            self.ratio = _decayed(self.ratio)

    def _fill(self, room: int) -> tuple[int, int, list[_Req]]:
        """Prefill tokens up to ``room``: the partial request first, then waiting ones while admitted."""
        tokens = pairs = 0
        done_now: list[_Req] = []
        while room > 0:
            if not self.prefilling:
                if (
                    not self.waiting
                    or len(self.running) >= self.cap
                    or self.preempted_now
                    or not self._admits(self.waiting[0], room)
                ):  # vLLM admits none in a step that preempted
                    break
                self._admit(self.waiting.popleft())
            r = self.prefilling[0]
            k = min(r.fill - r.done, room)
            if k > self.free():  # vLLM: allocate_slots fails and the newest running request, this one, is preempted
                if self.mixed:
                    self._evict(r)
                break
            pairs += chunk_pairs(k, r.done)
            r.done += k
            self.filled += k
            tokens += k
            room -= k
            if r.done == r.fill:
                done_now.append(self.prefilling.pop(0))
        return tokens, pairs, done_now

    # ------------------------------------------------------------------ admission and the pool

    def free(self) -> int:
        return self.pool - self.filled - self.context if self.pool else 1 << 62

    def _n_decoding(self) -> int:
        return len(self.running) - len(self.prefilling)

    def _admits(self, r: _Req, room: int) -> bool:
        decided = self._decided(r, room)
        if decided is not None:
            return decided
        need = r.isl + r.out + min(r.osl - r.out, CLIP_MAX_NEW_TOKENS)
        ours = sum(min(q.osl - q.out, CLIP_MAX_NEW_TOKENS) for q in self.batch)
        self._sum_reservations()
        return need < self.free() - ours - self.theirs.total * self.ratio / 1000

    def _decided(self, r: _Req, room: int) -> bool | None:
        """Whether ``r`` is admitted, where that needs no sum over the running requests; None where it does."""
        if not self.pool:
            return True
        fill = r.isl + r.out
        if self.mixed:  # allocate_slots for this step's chunk, past what the prefix cache still holds of it
            hit = self._hit(r)
            return min(fill - hit, room) <= self.free() - hit
        need = fill + min(r.osl - r.out, CLIP_MAX_NEW_TOKENS)  # its own output counted whole
        if need < self.free() - self.reserved:  # every reservation whole and unclipped: an upper bound
            return True
        ours = sum(min(q.osl - q.out, CLIP_MAX_NEW_TOKENS) for q in self.batch)
        theirs, exact = self._theirs_at_least()
        if need >= self.free() - ours - theirs * self.ratio / 1000:
            return False  # refused on a lower bound of the running reservations: no sum over them
        return True if exact else None

    def _theirs_at_least(self) -> tuple[int, bool]:
        """A lower bound of the running requests' clipped reservations, and whether it is their sum
        (kvplan.perf.reserve)."""
        return self.theirs.at_least(self.decode_count)

    def _sum_reservations(self) -> None:
        """Count the decoding requests' reservations afresh (speculative decoding, after a retraction)."""
        qs = [q for q in self.running.values() if q.start >= 0]
        for q, a in zip(qs, self.theirs.restart(self.decode_count, [q.osl - self._output(q) for q in qs]), strict=True):
            q.falls = a

    def _hit(self, r: _Req) -> int:
        """vLLM: the tokens of a preempted request its prefix cache still holds. Its freed blocks go to the free
        queue's tail (``KVCacheManager.free``) and others are reused first, so what survives is at most what is free;
        one token is always computed (a full hit recomputes the last). Whole blocks are not modelled: tokens."""
        return min(r.cached, self.free(), r.isl + r.out - 1) if self.mixed and self.pool else 0

    def _admit(self, r: _Req) -> None:
        r.seq = self.admitted
        self.admitted += 1
        self.batch.append(r)
        hit = self._hit(r)
        r.fill, r.done, r.start, r.cached = r.isl + r.out, hit, -1, 0
        self.filled += hit
        self.running[r.rid] = r
        self.prefilling.append(r)
        r.res = r.osl - r.out
        self.reserved += r.res

    def _output(self, r: _Req) -> int:
        """Output tokens ``r`` has made (decoding: its fill's token plus what its decode steps accepted)."""
        if r.start < 0:
            return r.out
        return min(r.out + (self.decode_count - r.start) * self.accept // 1000, r.osl)

    def _evict(self, r: _Req) -> None:
        """Preempt (vLLM: to the front of the waiting queue) or retract (SGLang: to its back) ``r``: its KV freed,
        its output kept, prefilled again later."""
        self._drop(r)
        if r.start < 0:
            self.prefilling.remove(r)
            self.filled -= r.done
            r.cached = r.done
        else:
            out = self._output(r)
            self._stops_decoding(r, out)
            held = r.fill + 1 + out - r.out
            self.context = max(self.context - held, 0)
            r.out, r.cached = out, held - 1  # the last sampled token was never computed
        r.done, r.start, r.epoch = 0, -1, r.epoch + 1
        self.preemptions += 1
        self.preempted_now = True
        if self.mixed:
            self.waiting.appendleft(r)
        else:
            self.waiting.append(r)

    def _retract(self) -> None:
        """SGLang ``retract_decode``: it sorts the decoding requests by (output tokens, −input) descending, a stable
        sort, and retracts from the end (fewest outputs, longest input, the latest admitted among equals) until the
        step fits; then the ratio's reset."""
        if self.spec:
            self._retract_by_scan()
            return
        n = self._n_decoding()
        while n > 1 and self.free() < n:  # one token a request a step without speculative decoding
            _, _, _, rid, epoch = heapq.heappop(self.victims)
            r = self.running.get(rid)
            if r is not None and r.epoch == epoch:
                self._evict(r)
                n -= 1
        made = self.made_less_start + n * self.decode_count
        self.ratio = min(1000, (made + RETRACT_DECODE_STEPS * n) * 1000 / max(self.osl_decoding, 1))

    def _retract_by_scan(self) -> None:
        """``_retract`` with speculative decoding, whose outputs do not keep their order as the steps run."""
        left = [q for q in self.running.values() if q.start >= 0]
        keys = [(self._output(q), -q.isl) for q in left]
        while len(left) > 1 and self.free() < len(left) * self.width:
            i = len(keys) - 1 - keys[::-1].index(min(keys))  # the sort's last: the latest admitted among equals
            del keys[i]
            self._evict(left.pop(i))
        total = sum(q.osl for q in left)
        made = sum(k[0] for k in keys)
        self._sum_reservations()
        self.ratio = min(1000, (made + RETRACT_DECODE_STEPS * len(left)) * 1000 / max(total, 1))

    # ------------------------------------------------------------------ after the step

    def _advance(self, n_dec: int, done_now: list[_Req]) -> None:
        s, c = self.step - 1, self.load
        ended: list[int] = []
        if n_dec:
            self._grow(n_dec)
            while self.decoding and self.decoding[0][0] <= self.decode_count:
                _, rid, epoch = heapq.heappop(self.decoding)
                r = self.running.get(rid)
                if r is None or r.epoch != epoch:  # preempted since: a stale entry
                    continue
                ended.append(rid)
                self._drop(r)
                self._stops_decoding(r, r.osl)
                self.context = max(self.context - r.isl - r.osl, 0)
        for r in done_now:
            self.filled -= r.fill
            r.out += 1
            if c.first[r.rid] < 0:
                c.first[r.rid] = s
            if r.out >= r.osl:
                ended.append(r.rid)
                self._drop(r)
                continue
            self._starts_decoding(r)
            left = r.osl - r.out
            steps = left if self.spec is None else steps_for(left, self.spec.milli)
            heapq.heappush(self.decoding, (self.decode_count + steps, r.rid, r.epoch))
            self.context += r.fill + 1
        for rid in ended:
            c.finished[rid] = s
            self.unfinished -= rid < self.stop_at
            c.send(s)

    def _starts_decoding(self, r: _Req) -> None:
        r.start = self.decode_count
        if self.mixed:
            return
        r.falls = self.theirs.add(self.decode_count, r.osl - r.out)
        if not self.spec:
            heapq.heappush(self.victims, (r.out - r.start, -r.isl, -r.seq, r.rid, r.epoch))
            self.osl_decoding += r.osl
            self.made_less_start += r.out - r.start

    def _stops_decoding(self, r: _Req, out: int) -> None:
        """``r`` finished (``out`` its osl) or is retracted with ``out`` tokens made: it leaves the counts."""
        if self.mixed:
            return
        self.theirs.drop(self.decode_count, r.falls, min(r.osl - out, CLIP_MAX_NEW_TOKENS))
        if not self.spec:
            self.osl_decoding -= r.osl
            self.made_less_start -= r.out - r.start

    def _grow(self, n_dec: int, steps: int = 1) -> None:
        """Decode steps ran: each of their requests holds the tokens it accepted."""
        self.decode_count += steps
        self.grown += steps * n_dec * self.accept
        self.context += self.grown // 1000
        self.grown %= 1000

    def _drop(self, r: _Req) -> None:
        del self.running[r.rid]
        self.reserved -= r.res

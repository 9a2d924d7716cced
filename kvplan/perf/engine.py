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
radix tree); its first token counts once. ``pool`` 0: no pool (the count cap alone).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.perf.spec import Acceptance, steps_for
from kvplan.perf.step import Batch, chunk_pairs

if TYPE_CHECKING:
    from kvplan.perf.sched import Load, _Req

CLIP_MAX_NEW_TOKENS = 4096
"""SGLang schedule_policy.py: the output tokens a request's reservation counts at most."""
INIT_RATIO_MILLI, MIN_RATIO_MILLI, DECAY_STEPS = 700, 98, 600
"""SGLang's new_token_ratio (thousandths; ``Scheduler.__init__``): SGLANG_INIT_NEW_TOKEN_RATIO 0.7 at start, down by
(0.7 − 0.7 × SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600 each decode step that
fits, reset after a retraction (``_retract``). Retracted requests go back to the queue's end
(``_extend_requests_to_queue``); the victims: fewest output tokens, then the longest input."""
RETRACT_DECODE_STEPS = 20
"""SGLang global_config.retract_decode_steps: decode steps the ratio reset assumes for each request left running."""


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
        self.peak = self.preemptions = 0
        self.changes = 0
        """Counts each change that can raise the running reservations past their last lower bound (a retraction or
        preemption; a request that finishes had none left, one that starts decoding is added to the bound)."""
        self.theirs_seen = (-1, 0, 0, 0)
        """(changes, decode count, the running reservations' sum, its terms) at the last exact sum (``_admits``)."""
        self.unfinished = stop_at

    def run(self) -> Stepped:
        """Step the engine's policy until every request (the first ``stop_at``, when given) has finished."""
        while len(self.steps) < 10_000_000:
            idle = not (self.waiting or self.running)
            for r in self.load.seen(self.steps, idle=idle):
                r.isl, r.osl = r.isl or self.isl, r.osl or self.osl
                self.waiting.append(r)
            if not (self.waiting or self.running):
                break
            self.preempted_now = False
            self.batch.clear()
            tokens, pairs, done_now, n_dec = self._vllm_step() if self.mixed else self._sglang_step()
            if not (tokens or n_dec):
                raise ValueError("the pool cannot hold the next request's step even alone")
            self.peak = max(self.peak, len(self.running))
            self.steps.append(Batch(prefill_tokens=tokens, prefill_pairs=pairs, decode_requests=n_dec,
                                    decode_context=self.context if n_dec else 0,
                                    sampled=n_dec * self.width + len(done_now),
                                    verify_tokens=self.width if n_dec else 1,
                                    draft_tokens=self.width if self.spec and n_dec else 0))  # fmt: skip
            self._advance(n_dec, done_now)
            if self.stop_at and self.unfinished == 0:
                break
        return Stepped(steps=self.steps, peak_running=self.peak, preemptions=self.preemptions)

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
            step = (INIT_RATIO_MILLI - MIN_RATIO_MILLI) / DECAY_STEPS
            self.ratio = max(self.ratio - step, MIN_RATIO_MILLI)
        return 0, 0, [], n_dec

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
        if need >= self.free() - ours - self._theirs_at_least() * self.ratio / 1000:
            return False  # refused on a lower bound of the running reservations: no sum over them
        left = [min(q.osl - self._output(q), CLIP_MAX_NEW_TOKENS) for q in self.running.values() if q.start >= 0]
        self.theirs_seen = (self.changes, self.decode_count, sum(left), len(left))
        return need < self.free() - ours - sum(left) * self.ratio / 1000

    def _bound_adds(self, term: int) -> None:
        """A request starts decoding: its reservation joins the lower bound (valued now, so it can only fall less
        since then than the bound's older terms)."""
        changes, count, total, terms = self.theirs_seen
        if changes == self.changes:
            self.theirs_seen = (changes, count, total + term, terms + 1)

    def _theirs_at_least(self) -> int:
        """A lower bound of the running requests' clipped reservations: the last exact sum plus the requests that
        started decoding since, each term less at most ceil(k × accept / 1000) after k decode steps; a request that
        finished held none; 0 after a retraction or preemption (``changes``)."""
        changes, count, total, terms = self.theirs_seen
        if changes != self.changes:
            return 0
        return max(total - terms * -(-(self.decode_count - count) * self.accept // 1000), 0)

    def _hit(self, r: _Req) -> int:
        """vLLM: the tokens of a preempted request its prefix cache still holds. Its freed blocks go to the free
        queue's tail (``KVCacheManager.free``) and others are reused first, so what survives is at most what is free;
        one token is always computed (a full hit recomputes the last). Whole blocks are not modelled: tokens."""
        return min(r.cached, self.free(), r.isl + r.out - 1) if self.mixed and self.pool else 0

    def _admit(self, r: _Req) -> None:
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
        self.changes += 1
        if r.start < 0:
            self.prefilling.remove(r)
            self.filled -= r.done
            r.cached = r.done
        else:
            out = self._output(r)
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
        """SGLang ``retract_decode``: fewest output tokens first, then the longest input, until the step fits;
        then the ratio's reset."""
        left = [q for q in self.running.values() if q.start >= 0]
        keys = [(self._output(q), -q.isl) for q in left]
        while len(left) > 1 and self.free() < len(left) * self.width:
            # the last of a stable descending sort: the smallest key, the latest admitted among equals
            i = min(range(len(keys)), key=lambda j: (keys[j], -j))
            del keys[i]
            self._evict(left.pop(i))
        total = sum(q.osl for q in left)
        made = sum(self._output(q) for q in left)
        self.ratio = min(1000, (made + RETRACT_DECODE_STEPS * len(left)) * 1000 / max(total, 1))

    # ------------------------------------------------------------------ after the step

    def _advance(self, n_dec: int, done_now: list[_Req]) -> None:
        s, c = len(self.steps) - 1, self.load
        ended: list[int] = []
        if n_dec:
            self.decode_count += 1
            self.grown += n_dec * self.accept
            self.context += self.grown // 1000
            self.grown %= 1000
            while self.decoding and self.decoding[0][0] <= self.decode_count:
                _, rid, epoch = heapq.heappop(self.decoding)
                r = self.running.get(rid)
                if r is None or r.epoch != epoch:  # preempted since: a stale entry
                    continue
                ended.append(rid)
                self._drop(r)
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
            r.start = self.decode_count
            self._bound_adds(min(r.osl - r.out, CLIP_MAX_NEW_TOKENS))
            left = r.osl - r.out
            steps = left if self.spec is None else steps_for(left, self.spec.milli)
            heapq.heappush(self.decoding, (self.decode_count + steps, r.rid, r.epoch))
            self.context += r.fill + 1
        for rid in ended:
            c.finished[rid] = s
            self.unfinished -= rid < self.stop_at
            c.send(s)

    def _drop(self, r: _Req) -> None:
        del self.running[r.rid]
        self.reserved -= r.res

"""What a prefix hit really saves (pure).

For a request of L tokens with a cached prefix of P tokens the engine reuses R tokens:
- SGLang: the radix match is page-aligned (64 × dcp tokens) and capped at L − 1 (one token must be computed);
  with EAGLE/MTP the key is the bigram view, so a prefix of P tokens gives P − 1 units before rounding.
- vLLM: the hit is capped at L − 1 tokens and rounded down to whole blocks (64 × dcp); with EAGLE/MTP and
  lookahead block hashes off (``disable_lookahead_block_hashes`` or a KV connector) one more block is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.engines.sglang_hybrid import prefix_reuse_rules
from kvplan.engines.vllm_hybrid import HYBRID_PREFIX_CACHING_SINCE
from kvplan.errors import InputError
from kvplan.limits import MAX_LOOP, bounded_int
from kvplan.plan.budget import kind_costs
from kvplan.units import cdiv
from kvplan.versions import parse_version


# What the reused tokens save, kind by kind:
#
# The lightning indexer scores each query token against every key before it (causal): a request of L tokens costs
# L(L + 1)/2 query-key pairs per indexer layer. A hit removes the prefix-internal pairs R(R + 1)/2 but not the
# suffix × prefix cross term S × R nor the suffix-internal S(S + 1)/2 (S = L − R), because top-k selection
# depends on the new queries. So the compute saved is R(R + 1) / (L(L + 1)), not R / L.
#
# A model without an indexer (GQA / MHA, plain MLA) pays the same causal pairs in its attention, on every layer
# and every query head: QK over head_dim and PV over v_head_dim, 2 FLOPs a multiply-add. The counts are then
# attention pairs, and the bytes read per key are the main KV of all layers.
#
# A hybrid: the engine's own rules say where a hit ends (SGLang 0.5.23: kvplan.engines.sglang_hybrid
# ``prefix_reuse_rules``; vLLM 0.33.0: the hybrid notes of kvplan.engines.vllm_hybrid, whose blocks are the aligned
# attention block, and no reuse for a Mamba hybrid before vLLM 0.26). kvplan assumes the cache still holds what the
# hit needs (the window before it, a state at its end); the pairs and FLOPs count the full-attention layers only.
def pairs(n: int) -> int:
    """Causal query-key pairs of n tokens: n(n + 1) / 2."""
    return n * (n + 1) // 2


@dataclass(frozen=True, kw_only=True)
class KindSaved:
    """A hybrid kind's bytes a hit does not write, on one GPU, and why."""

    kind: str
    bytes: int
    how: str


HYBRID_APPROXIMATION = (
    "APPROXIMATED: kvplan assumes the cache still holds what the hit needs (the sliding window's KV before the hit,"
    " a linear-attention state at its end, e.g. a previous prompt's end); the pairs and FLOPs count the"
    " full-attention layers only (the window and state layers' compute saved is not counted)"
)


def hybrid_rules(plan: PoolPlan) -> tuple[str, ...]:
    """How each engine limits a hybrid's prefix hit, in the engine rules' own sentences (empty when uniform)."""
    if not plan.pools:
        return ()
    if plan.engine == "sglang":
        return prefix_reuse_rules(plan)
    return tuple(n for n in plan.notes if n.startswith("vLLM prefix reuse") or "without prefix caching" in n)


def no_hybrid_reuse(plan: PoolPlan) -> bool:
    """vLLM before 0.26 runs a Mamba hybrid without prefix caching (kvplan.engines.vllm_hybrid)."""
    if plan.engine != "vllm" or not any(d.per == "request" for pool in plan.pools for d in pool.demands):
        return False

    return parse_version(plan.engine_version) < HYBRID_PREFIX_CACHING_SINCE


def kinds_saved(plan: PoolPlan, reused: int) -> tuple[KindSaved, ...]:
    """Per window / state kind of a hybrid: what a hit of ``reused`` tokens does not write on one GPU."""
    out = []
    for k in kind_costs(plan):
        if k.per == "window":
            out.append(
                KindSaved(
                    kind=k.kind,
                    bytes=reused * k.bytes_per_token,
                    how=f"{reused:,} rows × {k.bytes_per_token:,} B: the prefill does not write them; the hit reads "
                    f"the cached rows of the {k.window:,} tokens before it",
                )
            )
        elif k.per == "request":
            out.append(
                KindSaved(
                    kind=k.kind,
                    bytes=0,
                    how=f"the cached state ({k.request_max_bytes:,} B) is copied into the request's own state: "
                    f"one state written either way; the {reused:,} tokens' recurrence is not recomputed",
                )
            )
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class PrefixHit:
    plan: PoolPlan
    ctx_tokens: int
    hit_tokens: int
    """The prefix the cache holds (P)."""
    reusable_tokens: int
    """What the engine really reuses (R)."""
    rule: str
    chunk_tokens: int
    hybrid_rules: tuple[str, ...] = ()
    """A hybrid's engine rules for where a hit ends (empty for a uniform model)."""
    kinds_saved: tuple[KindSaved, ...] = ()

    @property
    def suffix_tokens(self) -> int:
        return self.ctx_tokens - self.reusable_tokens

    @property
    def pages(self) -> int:
        return self.reusable_tokens // self.plan.logical_page_tokens

    @property
    def main_bytes_saved(self) -> int:
        """Main KV not written, per GPU (each rank holds 64 rows of every page)."""
        return self.pages * self.plan.page_tokens * self.plan.cell.main_bytes

    @property
    def indexer_bytes_saved(self) -> int:
        return self.pages * self.plan.page_tokens * self.plan.cell.indexer_bytes

    @property
    def pairs_total(self) -> int:
        return pairs(self.ctx_tokens)

    @property
    def pairs_saved(self) -> int:
        return pairs(self.reusable_tokens)

    @property
    def pairs_cross(self) -> int:
        return self.suffix_tokens * self.reusable_tokens

    @property
    def pairs_suffix(self) -> int:
        return pairs(self.suffix_tokens)

    @property
    def pairs_paid(self) -> int:
        return self.pairs_cross + self.pairs_suffix

    @property
    def counts(self) -> str:
        """What the pairs are: 'indexer' (DSA: the lightning indexer's scores) or 'attention' (dense attention)."""
        return "indexer" if self.plan.arch.has_indexer else "attention"

    @property
    def flops_per_pair(self) -> int:
        """Indexer: index_n_heads × index_head_dim multiply-adds, 2 FLOPs each, per indexer layer.
        Attention: num_attention_heads × (head_dim + v_head_dim) multiply-adds (QK and PV), 2 FLOPs each."""
        a = self.plan.arch
        if a.has_indexer:
            return a.index_n_heads * a.index_head_dim * 2
        return a.num_attention_heads * (a.head_dim + a.v_head_dim) * 2

    @property
    def indexer_layers(self) -> int:
        """Layers that pay the pairs: the indexer layers, or every attention layer without an indexer (of the whole
        model: under pp, every stage's)."""
        return self.plan.model_indexer_layers if self.plan.arch.has_indexer else self.plan.model_main_layers

    def flops(self, n_pairs: int) -> int:
        """Indexer (or attention) FLOPs over all the layers that pay them."""
        return n_pairs * self.flops_per_pair * self.indexer_layers

    @property
    def saved_ppm(self) -> int:
        """Indexer compute really saved, parts per million."""
        return self.pairs_saved * 1_000_000 // self.pairs_total

    @property
    def naive_ppm(self) -> int:
        """The naive claim: hit ratio = compute saved."""
        return self.hit_tokens * 1_000_000 // self.ctx_tokens

    @property
    def suffix_chunks(self) -> int:
        return cdiv(self.suffix_tokens, self.chunk_tokens)

    def keys_read_by_chunk(self) -> tuple[int, ...]:
        """Keys each suffix prefill chunk scores against (its own end position)."""
        r, c, n = self.reusable_tokens, self.chunk_tokens, self.ctx_tokens
        return tuple(min(r + (k + 1) * c, n) for k in range(self.suffix_chunks))

    @property
    def indexer_k_bytes_per_key(self) -> int:
        """Indexer K bytes one key costs to read, over the indexer layers of one GPU (132 B × layers, × dcp
        replicated; under pp the binding stage's); without an indexer, the main KV of one key on one GPU."""
        if not self.plan.arch.has_indexer:
            return self.plan.cell.main_bytes
        return self.plan.indexer_bytes_per_layer * self.plan.indexer_layers


def reusable(plan: PoolPlan, ctx: int, hit: int, *, eagle: bool = False, lookahead: bool = True) -> tuple[int, str]:
    """Tokens the engine reuses for a cached prefix of ``hit`` tokens in a request of ``ctx``, and the rule."""
    page = plan.logical_page_tokens
    if plan.engine == "sglang":
        units = hit - 1 if eagle else hit
        r = min(units, ctx - 1) // page * page
        return max(r, 0), (
            f"SGLang radix match: min(P{' − 1 (EAGLE bigram key)' if eagle else ''}, L − 1) rounded down "
            f"to {page}-token pages"
        )
    if no_hybrid_reuse(plan):
        return 0, f"vLLM {plan.engine_version}: a Mamba hybrid runs without prefix caching, nothing is reused"
    r = min(hit, ctx - 1) // page * page
    rule = f"vLLM: min(P, L − 1) rounded down to {page}-token blocks"
    if eagle and not lookahead and r > 0:
        r -= page
        rule += ", minus one block (EAGLE drop: lookahead hashes off)"
    return r, rule


def prefix_hit(
    plan: PoolPlan, ctx: int, hit: int, *, chunk: int | None = None, eagle: bool = False, lookahead: bool = True
) -> PrefixHit:
    if ctx <= 0:
        raise InputError(f"--ctx must be positive, got {ctx}")
    if hit < 0:
        raise InputError(f"--hit must not be negative, got {hit}")
    if hit > ctx:
        raise InputError(f"--hit {hit:,} is longer than --ctx {ctx:,}")
    r, rule = reusable(plan, ctx, hit, eagle=eagle, lookahead=lookahead)
    if chunk is None:
        chunk = (
            plan.knob("chunked_prefill_size").as_int()
            if plan.engine == "sglang"
            else plan.extras["max_num_batched_tokens"]
        )
    if chunk <= 0:
        raise InputError(f"--chunk must be positive, got {chunk}")
    return PrefixHit(
        plan=plan,
        ctx_tokens=ctx,
        hit_tokens=hit,
        reusable_tokens=r,
        rule=rule,
        chunk_tokens=chunk,
        hybrid_rules=(*hybrid_rules(plan), HYBRID_APPROXIMATION) if plan.pools else (),
        kinds_saved=kinds_saved(plan, r) if plan.pools else (),
    )


def sweep_points(ctx: int, steps: int) -> tuple[int, ...]:
    """Hit lengths 0, ctx/steps, ..., ctx: at most limits.MAX_LOOP steps (one prefix plan each)."""
    if steps <= 0:
        raise InputError(f"--sweep must be positive, got {steps}")
    bounded_int(steps, name="--sweep (points, limits.MAX_LOOP)", low=1, high=MAX_LOOP)
    return tuple(ctx * k // steps for k in range(steps + 1))


def replay_approximation(plan: PoolPlan) -> str:
    """The sentence ``simulate --deploy`` says for a hybrid: what its replay approximates."""
    pool = plan.hybrid_pools[0]
    return (
        f"HYBRID, APPROXIMATED: the replay pages {pool.name}'s {plan.usable_pages:,} {pool.unit}s as if each request "
        f"took one {pool.unit} per {plan.logical_page_tokens} tokens of its full-attention layers; the other "
        "kinds' units (window pages, state slots or blocks), their pools and their limits on reuse (kvplan prefix "
        "says where each engine ends a hybrid's hit) are not replayed, so hit rates and capacity are upper bounds"
    )

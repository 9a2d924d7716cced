"""SGLang's hybrid pools: sliding-window (SWA) and linear-attention / Mamba state models, as SGLang 0.5.23
sizes them. Source: the sglang 0.5.23 release wheel (``pip download --no-deps sglang==0.5.23``), files under
``sglang/srt/``.

A hybrid model is planned as its full-attention layers (a uniform model: kvplan.engines.sglang.plan_pools sizes
their token pool with the memory chain every SGLang plan uses) plus the hybrid steps, each SGLang's own
(kvplan.engines.sglang_hybrid_sizer; DeepSeek-V4: kvplan.engines.sglang_dsv4), then told as the hybrid's pools here.
"""

from __future__ import annotations

from dataclasses import replace

import kvplan.engines.sglang as sglang
from kvplan.engines.common import Demand, Knob, Pool, PoolPlan, Term
from kvplan.engines.sglang_dsv4 import plan_dsv4
from kvplan.engines.sglang_dsv4_shape import Dsv4Shape, compress_state_write_pad, dsv4_pool_tokens, v4_page_bytes
from kvplan.engines.sglang_families import SglangHybridFamily, family_of
from kvplan.engines.sglang_hybrid_sizer import (
    DRAFT_POOL_LAYERS,
    HYBRID_VERSION,
    SPEC_MAX_RUNNING_REQUESTS,
    SWA_EVICTION_INTERVAL,
    SWA_FULL_TOKENS_RATIO,
    HybridSizer,
    engine_refuses,
    mamba_cache_size,
    mamba_cache_size_spec,
    mamba_slots_per_request,
    swa_pool_error,
    swa_pool_tokens,
)
from kvplan.engines.sglang_swa_cap import request_cap_for, swa_cap_rows_term, swa_pool_story
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.versions import parse_version

__all__ = [  # what tests and kvplan.plan.prefix import from here (the steps live in the modules above)
    "PREFIX_REUSE",
    "SWA_EVICTION_INTERVAL",
    "Dsv4Shape",
    "HybridSizer",
    "compress_state_write_pad",
    "dsv4_pool_tokens",
    "mamba_cache_size",
    "mamba_cache_size_spec",
    "mamba_slots_per_request",
    "plan",
    "prefix_reuse_rules",
    "swa_pool_error",
    "swa_pool_tokens",
    "v4_page_bytes",
]


def sizer_for(arch: ModelArch, dep: Deployment) -> tuple[ModelArch, HybridSizer]:
    """The hybrid's full-attention layers as a uniform model, and the steps that size its other pools.

    Refuses (one line, exit 2) what SGLang 0.5.23 sizes in ways kvplan does not plan.
    """
    family = family_of(arch)
    _refusals(arch, dep, family)
    swa_layers = [w for layer in arch.layers if (w := layer.window) is not None]
    states = [s for layer in arch.layers if (s := layer.state) is not None]
    plain = [layer for layer in arch.layers if layer.state is None and layer.window is None]
    full = [layer.caches[0] for layer in plain]
    if not full:
        raise engine_refuses(arch, dep, "a model without attention layers (all linear-attention state)")
    if len(set(swa_layers)) > 1 or len(set(states)) > 1 or len(set(full)) > 1:
        raise engine_refuses(arch, dep, "layers of one kind with different shapes")
    # GLM-5.3-Flash: the DSA pool of its MLA layers (HybridLinearKVPool over DSATokenToKVPool, one indexer K per
    # full layer that owns one: pool_configurator._compute_dsa_indexer_cell_size over full_attention_layer_ids)
    owners = tuple(layer.indexer is not None for layer in plain) if family.dsa_pool else ()
    # the NextN draft is in cell_size only when the TARGET config names num_nextn_predict_layers
    # (``spec_aux_hidden_state._resolve_eagle_aux_hidden_state``): GLM-5.3-Flash's does (1), Qwen3-Next's does not
    # (num_mtp_layers 0 here; _with_draft_pool allocates its draft pool beyond the budget)
    drafts = arch.num_mtp_layers if family.dsa_pool else 0
    view = replace(arch, num_layers=len(full), layers=(), indexer_full=owners, num_mtp_layers=drafts)
    if view.attention != full[0]:  # also a layer whose first cache is no full attention (MHA / GQA or MLA)
        raise engine_refuses(arch, dep, f"full-attention layers unlike the config's fields ({full[0]})")
    slots = 1
    if states:
        slots = mamba_slots_per_request(radix_cache=not dep.disable_radix_cache,
                                        extra_buffer=family.mamba_extra_buffer)  # fmt: skip
    interval = SWA_EVICTION_INTERVAL if dep.swa_eviction_interval is None else dep.swa_eviction_interval
    # the running requests the speculative buffers are reserved for: --max-running-requests, else SGLang's 48
    running = SPEC_MAX_RUNNING_REQUESTS if dep.max_running_requests is None else dep.max_running_requests
    topk = dep.speculative_eagle_topk
    sizer = HybridSizer(
        full_layers=len(full),
        swa=swa_layers[0] if swa_layers else None,
        swa_layers=len(swa_layers),
        state=states[0] if states else None,
        state_layers=len(states),
        swa_full_tokens_ratio=SWA_FULL_TOKENS_RATIO if dep.swa_full_tokens_ratio is None else dep.swa_full_tokens_ratio,
        slots_per_request=slots,
        max_mamba_cache_size=None if dep.max_mamba_cache_size is None
        else dep.max_mamba_cache_size // max(dep.dp_attention, 1),
        draft_tokens=dep.speculative_num_draft_tokens,
        spec_running=max(1, running // max(dep.dp_attention, 1)),
        dedup_conv=dep.gpu.vendor == "nvidia" and (topk is None or topk <= 1)
        and not (states and states[0].family == "kda"),
        eviction_interval=interval,
        swa_cap=request_cap_for(dep, window=swa_layers[0].window, eviction_interval=interval,
                                full_layers=len(full)) if swa_layers else None,
    )  # fmt: skip
    return view, sizer


def _refusals(arch: ModelArch, dep: Deployment, family: SglangHybridFamily) -> None:
    """What SGLang 0.5.23 sizes in ways kvplan does not plan, or does not serve at all (one line, exit 2)."""
    if parse_version(dep.engine_version) != HYBRID_VERSION:
        raise engine_refuses(arch, dep, "hybrid pools (read from SGLang 0.5.23 only: set engine_version=0.5.23)")
    if any(layer.compressed is not None for layer in arch.layers):
        raise engine_refuses(
            arch, dep, "DeepSeek-V4's pools (SGLang 0.5.23 sizes them with DSV4PoolConfigurator: SWA, C4, C128 and "
            "compressor-state pools)"
        )  # fmt: skip
    indexed = next((layer.index for layer in arch.layers if layer.indexer is not None), None)
    if indexed is not None and not family.dsa_pool:
        raise engine_refuses(arch, dep, "indexer K layers beside linear-attention state", indexed)
    if any(layer.window for layer in arch.layers) and any(layer.state for layer in arch.layers):
        raise engine_refuses(arch, dep, "sliding-window and linear-attention layers in one model")
    if dep.mtp and family.no_draft:
        raise PlanError(
            f"SGLang {dep.engine_version} has no draft for speculative decoding with {family.no_draft} ({arch.name}): "
            f"it ships no MTP / NextN layer (no num_nextn_predict_layers) and SGLang has no {family.no_draft} NextN "
            "model"
        )
    if dep.mtp and not family.speculative:
        raise engine_refuses(
            arch, dep, "speculative decoding with a hybrid model other than Qwen3-Next and GLM-5.3-Flash (draft SWA "
            "pools, other drafts' state)"
        )  # fmt: skip
    if dep.dcp > 1:
        raise engine_refuses(arch, dep, f"dcp {dep.dcp} with a hybrid model")


def plan(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pools SGLang 0.5.23 builds for a hybrid model on each GPU (module docstring)."""
    if any(layer.compressed is not None for layer in arch.layers):
        return plan_dsv4(arch, dep)
    view, sizer = sizer_for(arch, dep)
    if not family_of(arch).dsa_pool:
        return _with_pools(sglang.plan_pools(view, dep, sizer), arch, sizer)
    dep, said = _dsa_page_override(arch, dep)
    p = _with_pools(sglang.plan_pools(view, dep, sizer), arch, sizer)
    return replace(p, notes=(*p.notes, *(n for n in (said, _kpool_tail_note(view, p)) if n)))


def _kpool_tail_note(view: ModelArch, p: PoolPlan) -> str:
    """GLM-5.3-Flash's pooled-index compress tails (``DSATokenToKVPool._init_kpool_compress_tail_buffers``, only
    with ``index_kpool > 1`` and compression): a K and a score tensor, bf16, of (max_running_requests + 2) rows ×
    (index_kpool + draft tokens) × index_head_dim on each indexer layer; allocated beside the pool, from the slack."""
    rows = p.knob("max_running_requests").as_int() + 2  # req_to_token rows (+1) and the sentinel slot (+1)
    width = view.index_kpool + p.deployment.speculative_num_draft_tokens
    # with speculative decoding the draft worker's one-layer DSA pool has its own tails (index_kpool > 1)
    layers = view.full_indexer_layers + (1 if p.draft_layers else 0)
    size = 2 * rows * width * view.index_head_dim * 2 * layers
    return (f"pooled-index compress tails: 2 × {rows:,} requests × {width} × {view.index_head_dim} × 2 B × "
            f"{layers} indexer layers = {size:,} B beside the pool, from the slack")  # fmt: skip


def _dsa_page_override(arch: ModelArch, dep: Deployment) -> tuple[Deployment, str]:
    """GLM-5.3-Flash: SGLang's DSA override sets the page to 64 × index_kpool over any --page-size
    (``model_overrides/deepseek_v2.py`` ``_deepseek_family_overrides``: "Setting page size to {page_size} for
    DeepSeek DSA.", a model override declared over the flag), so a pooled index key never spans two pages."""
    page = 64 * arch.index_kpool
    if dep.page_size in (None, page) or dep.gpu.vendor != "nvidia":
        return dep, ""
    said = (f"SGLang sets page_size {page} (64 × index_kpool {arch.index_kpool}) for this DSA model over the "
            f"deployment's page_size {dep.page_size}: \"Setting page size to {page} for DeepSeek DSA.\"")  # fmt: skip
    return replace(dep, page_size=None), said


def _with_pools(p: PoolPlan, arch: ModelArch, s: HybridSizer) -> PoolPlan:
    """The plan of the full-attention layers, told as the hybrid's: its pools, knobs, chain terms and notes."""
    pools = [_full_pool(p, s)]
    knobs = list(p.knobs)
    chain = [_hybrid_rows_term(t, p, s) for t in p.chain]
    notes = list(p.notes)
    if s.swa is not None:
        pools.append(_swa_pool(p, s))
        swa_knobs, term, said = swa_pool_story(p, s)
        knobs += swa_knobs
        chain.append(term)
        notes.append(said)
    if s.state is not None:
        pools.append(_state_pool(p, s))
        knobs += _state_knobs(p, s)
        at = next(i for i, t in enumerate(chain) if t.label == "available for the KV pool")
        chain[at:at] = _state_terms(p, s)
        notes.append(_state_note(s))
    if s.draft_tokens and p.draft_layers:  # GLM-5.3-Flash: the draft rows are in the cell (plan_pools)
        notes.append(
            f"speculative decoding (NEXTN / EAGLE, {s.draft_tokens} draft tokens): the config's "
            f"{p.draft_layers} NextN layer is in cell_size (DefaultPoolConfigurator: int(target KV × "
            f"{p.draft_layers} / {s.full_layers}) + its indexer K on every draft layer) and the draft worker's "
            "HybridLinearKVPool of one DSA layer shares the target's rows and Mamba state slots; " + _spec_state_note(s)
        )
    p = replace(p, arch=arch, pools=tuple(pools), knobs=tuple(knobs), chain=tuple(chain), notes=tuple(notes))
    return _with_draft_pool(p, s) if s.draft_tokens and not p.draft_layers else p


def _full_pool(p: PoolPlan, s: HybridSizer) -> Pool:
    """The full-attention (or MLA) token pool over the full layers, in pages."""
    full_kind = "MLA" if p.mla_layout is not None else "full attention"
    return Pool(
        name=f"{full_kind} ({s.full_layers} layers)",
        unit="page",
        page_tokens=p.page_tokens,
        capacity=p.usable_pages,
        unit_bytes=p.cell.total_bytes * p.page_tokens,
        demands=(Demand(full_kind, "token"),),
    )


def _swa_pool(p: PoolPlan, s: HybridSizer) -> Pool:
    """SWAKVPool's SWA pages over the SWA layers."""
    assert s.swa is not None
    page = p.page_tokens
    # compute_swa_request_cap: a running request keeps window + eviction interval tokens, + a padding page
    # and the next decode page: ceil(min(tokens, window + 128) / page) + 2 pages
    span = s.swa.window + s.eviction_interval
    return Pool(
        name=f"sliding window ({s.swa_layers} layers)",
        unit="page",
        page_tokens=page,
        capacity=p.extras["swa_tokens"] // page,
        unit_bytes=s.swa_cell(p.kv_dtype, p.attn_tp) * page,
        demands=(Demand("sliding-window", "window", window=span, extra=2),),
    )


def _state_pool(p: PoolPlan, s: HybridSizer) -> Pool:
    """MambaPool's slots, ``slots_per_request`` of them a running request."""
    return Pool(
        name=f"mamba state ({s.state_layers} layers)",
        unit="slot",
        page_tokens=1,
        capacity=p.extras["max_mamba_cache_size"],
        unit_bytes=s.state_bytes_per_request(p.attn_tp),
        demands=(Demand("linear-attention state", "request", units=s.slots_per_request),),
    )


def _state_knobs(p: PoolPlan, s: HybridSizer) -> list[Knob]:
    """max_mamba_cache_size (set, per dp worker, or auto-sized with the 0.9 ratio kvplan has no knob for)."""
    knobs = []
    how = "default: int((rest × 0.9 / 1.9 × 2^30 − per_req) // per_req)"
    if s.max_mamba_cache_size is not None:
        how = "set" if p.deployment.dp_attention <= 1 else f"set, // dp_attention {p.deployment.dp_attention}"
    else:
        knobs.append(Knob("mamba_full_memory_ratio", s.mamba_full_memory_ratio, "default: 0.9 (no kvplan knob)"))
    knobs.append(Knob("max_mamba_cache_size", p.extras["max_mamba_cache_size"], how))
    return knobs


def _state_terms(p: PoolPlan, s: HybridSizer) -> list[Term]:
    """The chain's state lines, before the KV budget: the Mamba state pool, the speculative state it reserves."""
    slots, tp = p.extras["max_mamba_cache_size"], p.attn_tp
    per = s.state_bytes_per_request(tp)
    terms = [
        Term(
            "Mamba state pool",
            (slots + 1) * per,
            f"(max_mamba_cache_size {slots:,} + 1) × {per:,} B per request, taken before the token pool",
        )
    ]
    if s.draft_tokens:
        terms.append(
            Term(
                "speculative state (reserved)",
                s.spec_reserved_bytes(slots, tp),
                f"{per:,} B per request × (min(max_running_requests {s.spec_running}, {slots:,} // "
                f"{s.slots_per_request}) = {s.spec_requests(slots):,} + 1) × {s.draft_tokens} draft tokens; "
                f"allocated {s.spec_alloc_bytes(slots, tp):,} B (intermediate SSM states + conv windows)",
            )
        )
    return terms


def _state_note(s: HybridSizer) -> str:
    if s.slots_per_request != 5:
        return f"Mamba state: {s.slots_per_request} slots reserved per running request"
    return (
        f"Mamba state: {s.slots_per_request} slots reserved per running request (3 + 2 extra-buffer tracking"
        " slots with the overlap scheduler); the radix cache keeps finished requests' states in free slots."
        " ASSUMPTION: radix cache on, overlap scheduler on, triton linear-attention backend (SGLang's defaults)"
    )


def _spec_state_note(s: HybridSizer) -> str:
    return (
        f"SGLang reserves {s.draft_tokens} intermediate states per running request (intermediate_ssm_state_cache, "
        "intermediate_conv_window" + ("" if s.dedup_conv else ", dense: KDA or eagle top-k > 1")
        + ") out of the Mamba budget before sizing max_mamba_cache_size (_handle_max_mamba_cache: "
        "K = int((budget − per_req × (1 + D)) // (per_req × (1 + D / mamba_ratio))))"
    )  # fmt: skip


def _with_draft_pool(p: PoolPlan, s: HybridSizer) -> PoolPlan:
    """Qwen3-Next with MTP (NEXTN): the draft worker's own KV pool and the speculative notes.

    The draft pool is sized off the TARGET config when no draft path is given
    (``model_runner_components/spec_aux_hidden_state.py`` ``_resolve_eagle_aux_hidden_state``); Qwen3-Next's
    config names no ``num_nextn_predict_layers``, so ``eagle_draft_num_layers`` stays None and
    ``DefaultPoolConfigurator`` adds no draft term to cell_size. The draft worker then reuses the target's
    ``max_total_num_tokens`` (``KVCacheConfigurator.configure``: "Draft worker requires memory_pool_config") and
    ``_build_hybrid_linear_kv_pool`` builds a ``HybridLinearKVPool`` of ONE full-attention layer (``[0] if
    is_draft_worker``) over it, sharing the target's Mamba pool: (rows + page) rows × the layer's bytes, allocated
    beyond the budget, from the slack."""
    page = p.page_tokens
    draft = (p.rows + page) * p.mla_bytes_per_layer * DRAFT_POOL_LAYERS if p.rows else 0
    mmap = tuple(
        replace(sg, bytes=sg.bytes + draft) if sg.label == "draft"
        else replace(sg, bytes=sg.bytes - draft) if sg.label == "reserve" else sg
        for sg in p.memory_map
    )  # fmt: skip
    chain = (
        *p.chain,
        Term(
            "MTP draft KV pool",
            draft,
            f"(rows {p.rows:,} + {page}) × {p.mla_bytes_per_layer:,} B × {DRAFT_POOL_LAYERS} NextN layer: "
            "not in cell_size (the config names no num_nextn_predict_layers), allocated from the slack",
        ),
    )
    notes = [
        f"speculative decoding (NEXTN / EAGLE, {s.draft_tokens} draft tokens): the draft worker shares the target's "
        f"token pool size ({p.rows:,} rows) with its own {DRAFT_POOL_LAYERS}-layer KV pool "
        f"({draft:,} B beyond the budget, from the slack) and the target's Mamba state slots",
        "speculative state: " + _spec_state_note(s),
    ]
    return replace(
        p,
        chain=chain,
        memory_map=mmap,
        allocated_bytes=p.allocated_bytes + draft,
        extras={**p.extras, "draft_alloc_bytes": draft},
        notes=(*p.notes, *notes),
    )


def _hybrid_rows_term(t: Term, p: PoolPlan, s: HybridSizer) -> Term:
    """The chain's rows line as the hybrid computes it (the full layers' cell; SWA: the ratio-weighted cell)."""
    if t.label == "available for the KV pool" and s.state is not None:
        return Term(t.label, t.bytes, "free after weights − slack − Mamba state pool")
    if t.label == "cell":
        return Term("cell", t.bytes, f"bytes per full-attention pool row ({s.full_layers} full layers)")
    if t.label != "pool rows per GPU" or s.swa is None:
        return t
    if s.swa_cap is not None:
        return swa_cap_rows_term(p, s)
    swa = s.swa_cell(p.kv_dtype, p.attn_tp)
    cell = f"({p.cell.total_bytes:,} + {s.swa_full_tokens_ratio} × {swa:,})"
    page = p.page_tokens
    return Term(t.label, None, f"{p.rows:,} = int(available // {cell}) // {page} × {page} (full_layer_tokens)")


MAMBA_TRACK_INTERVAL = 256
"""``--mamba-track-interval`` default (``arg_groups/fields/exec_.py``): decode tokens between state checkpoints."""

PREFIX_REUSE = {
    "sliding-window": (
        "SGLang (UnifiedRadixCache, SWA component): a prefix hit ends where the SWA KV of the sliding_window_size "
        "tokens before it is still cached (the match validator accumulates the window); the radix cache may have "
        "evicted (tombstoned) older SWA KV while the full-attention KV of those tokens stays"
    ),
    "linear-attention state": (
        "SGLang (UnifiedRadixCache, Mamba component): a prefix hit ends at the deepest node holding a cached state "
        f"(states checkpointed at the end of a prefill and every {MAMBA_TRACK_INTERVAL} decode tokens with the "
        "extra_buffer strategy); the full-attention KV up to there is reused and the state copied into the "
        "request's own slot (copy-on-write), the tokens after it are recomputed"
    ),
}
"""How a prefix hit is limited by each hybrid kind on SGLang 0.5.23 (``mem_cache/unified_cache/components/``
README and ``swa.py`` / ``mamba.py``: the match validators, ``finalize_match_result_in_cache``)."""


def prefix_reuse_rules(p: PoolPlan) -> tuple[str, ...]:
    """The sentences that limit what a prefix hit reuses on this SGLang hybrid plan (empty for a uniform plan)."""
    kinds = {d.kind for pool in p.pools for d in pool.demands}
    return tuple(text for kind, text in PREFIX_REUSE.items() if kind in kinds)

"""DeepSeek-V4 on SGLang 0.5.23: the view the memory chain plans, then its three pools (compressed KV, sliding window
with the C4 compress state, C128 compress state), knobs, chain terms and allocation, each step cited (pure).
"""

from __future__ import annotations

from dataclasses import replace

import kvplan.engines.sglang as sglang
from kvplan.engines.common import Cell, Demand, Knob, Pool, PoolPlan, Segment, Term, memory_map
from kvplan.engines.sglang_dsv4_shape import (
    COMPRESS_RING,
    DSV4_MAX_RUNNING_REQUESTS,
    DSV4_PAGE_SIZE,
    DSV4_SWA_FULL_TOKENS_RATIO,
    SPEC_COMPRESS_RING,
    V4_ROW_BYTES,
    Dsv4Shape,
    Dsv4Sizer,
    compress_state_write_pad,
    dsv4_indexer_bytes,
)
from kvplan.engines.sglang_hybrid_sizer import HYBRID_VERSION, SWA_EVICTION_INTERVAL, engine_refuses
from kvplan.engines.sglang_requests import req_to_token_extra
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.units import cdiv
from kvplan.versions import parse_version


def dsv4_sizer_for(arch: ModelArch, dep: Deployment) -> tuple[ModelArch, Dsv4Sizer, list[str]]:
    """DeepSeek-V4 as SGLang 0.5.23 serves it: a view for the memory chain (an MHA model, as SGLang's
    ModelConfig sets ``attention_arch = AttentionArch.MHA`` for V4: the mem-fraction heuristic's non-MLA branch),
    the sizer, and the notes on what SGLang overrode. Refuses (one line, exit 2) what kvplan does not plan."""
    comp = [c for layer in arch.layers if (c := layer.compressed) is not None]
    ratios = {c.compress_ratio for c in comp}
    if not ratios <= {0, 4, 128} or len({(c.head_dim, c.qk_rope_head_dim, c.window) for c in comp}) != 1:
        raise engine_refuses(arch, dep, f"DeepSeek-V4 compress ratios {sorted(ratios - {0, 4, 128})} (0, 4, 128 only)")
    d = dep.speculative_num_draft_tokens
    rings = SPEC_COMPRESS_RING if d else COMPRESS_RING
    for r in (4, 128):  # DSV4PoolConfigurator._assert_ring_serves_draft_tokens (c4 / c128 layers present)
        pad = compress_state_write_pad(r, rings[r])
        if d and any(c.compress_ratio == r for c in comp) and d > pad:
            raise PlanError(
                f"SGLang refuses it: speculative_num_draft_tokens={d} exceeds what the c{r} compress state ring can "
                f"keep resident (ring_size={rings[r]} serves at most {pad} draft tokens). Lower the draft count, or "
                "grow the ring in get_compress_state_ring_size()."
            )
    if dep.dcp > 1 or dep.pp > 1:
        raise engine_refuses(arch, dep, f"DeepSeek-V4 with dcp {dep.dcp} / pp {dep.pp}")
    if dep.gpu.vendor != "nvidia" or dep.gpu.sm // 10 == 10:
        raise engine_refuses(
            arch, dep, f"DeepSeek-V4's pools on {dep.gpu.name} (SGLang picks the V4.1 KV layout on SM100/SM103 and "
            "other pools on ROCm; kvplan plans the V4 FlashMLA layout of the other NVIDIA GPUs)"
        )  # fmt: skip
    if dep.kv_cache_dtype not in ("auto", "fp8_e4m3", "bfloat16"):
        # overrides._deepseek_v4_kv_cache_dtype
        raise PlanError(f"SGLang refuses DeepSeek-V4: {dep.kv_cache_dtype} is not supported for DeepseekV4ForCausalLM")
    first = comp[0]
    shape = Dsv4Shape(
        layers=len(comp),
        c4_layers=sum(c.compress_ratio == 4 for c in comp),
        c128_layers=sum(c.compress_ratio == 128 for c in comp),
        head_dim=first.head_dim,
        index_head_dim=arch.index_head_dim,
        window=first.window,
        ring4=rings[4],
        ring128=rings[128],
        # one draft layer over num_layers_total (the stage's compress_ratios: every layer)
        spec_infl=(len(comp) + 1) / len(comp) if d else 1.0,
    )
    notes = []
    if dep.page_size is not None and dep.page_size != DSV4_PAGE_SIZE:
        notes.append(f"SGLang sets page_size to {DSV4_PAGE_SIZE} for DeepseekV4ForCausalLM (model_overrides/"
                     f"deepseek_v4.py) over the deployment's {dep.page_size}")  # fmt: skip
    if dep.attention_backend is not None and dep.attention_backend != "dsv4":
        notes.append(f"SGLang sets attention_backend dsv4 for DeepseekV4ForCausalLM over {dep.attention_backend}")
    ratio = DSV4_SWA_FULL_TOKENS_RATIO if dep.swa_full_tokens_ratio is None else dep.swa_full_tokens_ratio
    requested = dep.max_running_requests if dep.max_running_requests is not None else DSV4_MAX_RUNNING_REQUESTS
    sizer = Dsv4Sizer(
        full_layers=0,
        swa_full_tokens_ratio=ratio,
        shape=shape,
        requested_mrr=max(1, requested // max(dep.dp_attention, 1)),
    )
    view = replace(arch, layers=(), indexer_full=())  # FullAttention(1 kv head, head_dim): SGLang's MHA
    return view, sizer, notes


def plan_dsv4(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pools SGLang 0.5.23 builds for DeepSeek-V4 on each GPU (DSV4PoolConfigurator, ratio mode).

    The memory chain is every SGLang plan's (``_profile_available_bytes``); then
    ``calculate_pool_sizes``: the c128 compress-state pool (``(mrr + 1) × 128`` ring rows) is fixed bytes taken
    first, the rest divided by ``bytes_per_full_token`` (0.1 × an SWA token + the C4 / C128 KV and indexer a full
    token adds) gives ``full_max_total_num_tokens`` (the logged ``max_total_num_tokens``: ``rows`` /
    ``logged_tokens`` here), and the SWA pool ``int(full × 0.1) // 256 × 256``. Log: "DSV4 pool sizes: full=F,
    swa=S, c4=F//4, c128=F//128, c4_state=S//256×8, c128_state=0" (the c128 state is sized after
    max_running_requests is known: (mrr + 1) × 128).
    """
    if parse_version(dep.engine_version) != HYBRID_VERSION:
        raise engine_refuses(arch, dep, "hybrid pools (read from SGLang 0.5.23 only: set engine_version=0.5.23)")
    view, s, said = dsv4_sizer_for(arch, dep)
    dtype = "fp8_e4m3" if dep.kv_cache_dtype == "auto" else dep.kv_cache_dtype
    run = replace(dep, page_size=DSV4_PAGE_SIZE, attention_backend=None, kv_cache_dtype=dtype)
    p = sglang.plan_pools(view, run, s)
    return _with_dsv4_pools(p, arch, dep, s, said)


def _with_dsv4_pools(p: PoolPlan, arch: ModelArch, dep: Deployment, s: Dsv4Sizer, said: list[str]) -> PoolPlan:
    """The plan of the view, told as DeepSeek-V4's: its three pools, knobs, chain terms, allocation and notes."""
    sh = s._shape()
    page = sh.page
    rows = p.rows
    mrr = min(s.requested_mrr, rows // 2) if rows else s.requested_mrr
    idx_page = page // 4 * dsv4_indexer_bytes(sh.index_head_dim) * sh.c4_layers
    main_page = sh.full_page_bytes - idx_page
    full_pages, swa_pages = rows // page, p.extras["swa_tokens"] // page
    notes = [*p.notes, *said, *_dsv4_notes(sh)]
    draft = 0
    if dep.mtp:
        # the draft worker reuses the full / SWA sizes with its own one-layer pools (no c4 / c128 / state pools:
        # KVCacheConfigurator._derive_pool_sizes zeroes them): its bytes are the inflation's share of the budget
        per_token = sh.bytes_per_full_token(s.swa_full_tokens_ratio)
        draft = int(rows * per_token) - int(rows * per_token / sh.spec_infl)
        notes.append(_dsv4_spec_note(sh, dep, draft))
    state_alloc = sh.c128_state_fixed_bytes(mrr)  # finalize_with_max_running_requests: (mrr + 1) × 128 rows
    swa_alloc = swa_pages * sh.swa_page_bytes
    extras = {
        **p.extras,
        "draft_alloc_bytes": draft,
        "swa_alloc_bytes": swa_alloc,
        "c4_tokens": rows // 4,
        "c128_tokens": rows // 128,
        "c4_state_rows": swa_pages * sh.ring4,
        "c128_state_rows": (mrr + 1) * sh.ring128,
        "c128_state_alloc_bytes": state_alloc,
        "mla_alloc_bytes": 0,
        # ReqToTokenPool as plan_pools sizes it, with the max_running_requests SGLang really uses (256)
        "req_to_token_bytes": (mrr + 1) * (p.context_len + req_to_token_extra(dep, page)) * 4,
        "indexer_alloc_bytes": full_pages * idx_page,
    }
    return replace(
        p,
        arch=arch,
        deployment=dep,
        pools=_dsv4_pools(sh, rows, p.extras["swa_tokens"], mrr),
        knobs=_dsv4_knobs(p, dep, s, mrr),
        chain=_dsv4_chain(p, s),
        notes=tuple(notes),
        cell=Cell(main_bytes=cdiv(main_page, page), indexer_bytes=cdiv(idx_page, page)),
        mla_layout=None,
        mla_bytes_per_layer=V4_ROW_BYTES,
        main_layers=sh.layers,
        indexer_bytes_per_layer=dsv4_indexer_bytes(sh.index_head_dim),
        indexer_layers=sh.c4_layers,
        indexer_rule="compress_ratio 4 layers (C4), on their compressed tokens",
        max_running_requests=mrr,
        allocated_bytes=full_pages * sh.full_page_bytes + swa_alloc + state_alloc + draft,
        memory_map=_dsv4_memory_map(
            p, dep, main=full_pages * main_page + swa_alloc + state_alloc, indexer=full_pages * idx_page, draft=draft
        ),
        extras=extras,
    )


def _dsv4_pools(sh: Dsv4Shape, rows: int, swa: int, mrr: int) -> tuple[Pool, ...]:
    """The full pool (C4 KV + indexer keys, C128 KV), the SWA pool (+ C4 compress state), the C128 state slots."""
    page = sh.page
    layers = f"C4 {sh.c4_layers} layers with the indexer, C128 {sh.c128_layers} layers"
    return (
        Pool(
            name=f"compressed KV ({layers})",
            unit="page",
            page_tokens=page,
            capacity=rows // page,
            unit_bytes=sh.full_page_bytes,
            demands=(Demand("compressed attention", "token"),),
        ),
        Pool(
            name=f"sliding window ({sh.layers} layers, + C4 compress state)",
            unit="page",
            page_tokens=page,
            capacity=swa // page,
            unit_bytes=sh.swa_page_bytes,
            demands=(Demand("sliding-window", "window", window=sh.window + SWA_EVICTION_INTERVAL, extra=2),),
        ),
        Pool(
            name=f"C128 compress state ({sh.c128_layers} layers)",
            unit="slot",
            page_tokens=1,
            capacity=mrr,
            unit_bytes=sh.c128_state_slot_bytes(),
            demands=(Demand("compress state", "request"),),
        ),
    )


_FORCED = {
    "page_size": "default: 256, forced for DeepseekV4ForCausalLM (model_overrides/deepseek_v4.py)",
    "attention_backend": "default: forced for DeepseekV4ForCausalLM; dsv4_attn_backend flashmla",
}
"""The knobs SGLang overrides for DeepseekV4ForCausalLM, with the reason the plan prints."""


def _dsv4_knobs(p: PoolPlan, dep: Deployment, s: Dsv4Sizer, mrr: int) -> tuple[Knob, ...]:
    """The view's knobs with SGLang's V4 overrides (page 256, dsv4 backend, fp8, 256 running requests), no MLA
    layout, and the V4 knobs (the SWA ratio, the KV layout)."""
    rows = p.rows
    mrr_origin = "set" if dep.max_running_requests is not None else "default: 256 (apply_deepseek_v4_defaults)"
    if rows and mrr < s.requested_mrr:
        mrr_origin += f"; reduced to rows // 2 = {rows // 2:,}"
    forced = {"page_size": s._shape().page, "attention_backend": "dsv4"}
    knobs: list[Knob] = []
    for k in p.knobs:
        if k.name in _FORCED:
            k = Knob(k.name, forced[k.name], _FORCED[k.name])
        elif k.name == "kv_cache_dtype" and dep.kv_cache_dtype == "auto":
            k = Knob("kv_cache_dtype", "fp8_e4m3", "default: auto -> fp8_e4m3 for DeepseekV4ForCausalLM")
        elif k.name == "max_running_requests":
            k = Knob("max_running_requests", mrr, mrr_origin)
        elif k.name == "mla_layout":
            continue
        knobs.append(k)
    ratio_origin = "set" if dep.swa_full_tokens_ratio is not None else "default: 0.1 for DeepseekV4ForCausalLM"
    knobs.append(Knob("swa_full_tokens_ratio", s.swa_full_tokens_ratio, ratio_origin))
    knobs.append(Knob("dsv4_kv_layout", "V4 (584 B, pages padded to 576 B)", "default: SGLANG_DSV4_KV_LAYOUT auto"))
    return tuple(knobs)


def _dsv4_chain(p: PoolPlan, s: Dsv4Sizer) -> tuple[Term, ...]:
    """The view's chain with the C128 state taken first, the bytes per full token as the cell, the V4 pool line."""
    sh = s._shape()
    page, rows, swa, ratio = sh.page, p.rows, p.extras["swa_tokens"], s.swa_full_tokens_ratio
    per_token = sh.bytes_per_full_token(ratio)
    chain: list[Term] = []
    for t in p.chain:
        if t.label == "cell":
            chain.append(
                Term(
                    "C128 compress-state pool",
                    sh.c128_state_fixed_bytes(s.requested_mrr),
                    f"ceil(({s.requested_mrr} + 1) × {sh.ring128} + {sh.ring128 + 1}, 128) × 128 rows × 2 × "
                    f"{sh.head_dim} × 4 B × {sh.c128_layers} layers, fixed bytes taken before the token pools",
                )
            )
            t = Term(
                "cell",
                None,
                f"bytes_per_full_token {per_token:,.2f} = ({ratio} × {sh.swa_page_bytes / page:,.2f}"
                f" (SWA + C4 state) + {sh.full_page_bytes / page:,.2f} (C4 KV + indexer, C128 KV))"
                + (f" × ({sh.layers} + 1) / {sh.layers} (the draft worker)" if sh.spec_infl != 1.0 else ""),
            )
        elif t.label == "pool rows per GPU":
            t = Term(
                t.label,
                None,
                f"{rows:,} = int((available − C128 state) / {per_token:,.2f}) // {page} × {page} (full); "
                f"SWA {swa:,} = int(full × {ratio}) // {page} × {page}",
            )
        elif t.label == "logged max_total_num_tokens":
            t = Term(
                t.label,
                None,
                f"DSV4 pool sizes: full={rows}, swa={swa}, c4={rows // 4}, c128={rows // 128}, "
                f"c4_state={swa // page * sh.ring4}, c128_state=0",
            )
        chain.append(t)
    return tuple(chain)


def _dsv4_notes(sh: Dsv4Shape) -> list[str]:
    return [
        "DeepSeek-V4 on SGLang 0.5.23 (DSV4PoolConfigurator, ratio mode): the full pool's pages carry the C4 "
        "compressed KV + indexer keys (one per 4 tokens) and the C128 compressed KV (one per 128); the SWA pool "
        f"holds each layer's last {sh.window} tokens + the C4 compress-state rings; one C128 ring per running request",
        "ASSUMPTION: SM90-class NVIDIA GPU (V4 FlashMLA layout), SGLANG_DSV4_COMPRESS_STATE_DTYPE float32, no "
        "online c128 compression, no HiSparse (SGLang's defaults); allocated bytes are "
        "the configurator's budget figures (the pools' padding pages are not modelled)",
    ]


def _dsv4_spec_note(sh: Dsv4Shape, dep: Deployment, draft: int) -> str:
    return (
        f"speculative decoding (MTP / NEXTN, {dep.speculative_num_draft_tokens} draft tokens): "
        f"bytes_per_full_token × ({sh.layers} + 1) / {sh.layers} reserves the draft worker's one-layer pools "
        f"(~{draft:,} B at these "
        f"sizes); the compress-state rings grow to {sh.ring4} (C4) and {sh.ring128} (C128) rows "
        "(get_compress_state_ring_size), serving at most "
        f"{compress_state_write_pad(4, sh.ring4)} draft tokens; max_running_requests stays "
        f"{DSV4_MAX_RUNNING_REQUESTS} (apply_deepseek_v4_defaults runs before the speculative hook's 48)"
    )


def _dsv4_memory_map(p: PoolPlan, dep: Deployment, *, main: int, indexer: int, draft: int) -> tuple[Segment, ...]:
    """The view's map with V4's pools: the same weights and driver share, the budget as the configurator fills it."""
    outside = next(
        sg for sg in p.memory_map if sg.label not in {"weights", "main KV", "indexer", "draft", "reserve", "free"}
    )
    weights = next(sg.bytes for sg in p.memory_map if sg.label == "weights")
    return memory_map(
        nvml_total=dep.gpu.nvml_total_bytes,
        outside=(outside.label, outside.bytes),
        weights=weights,
        main=main,
        indexer=indexer,
        draft=draft,
        available=p.available_bytes,
    )

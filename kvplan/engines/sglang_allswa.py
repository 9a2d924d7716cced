"""SGLang's pool for a model whose every layer is sliding-window attention, as SGLang 0.5.23 sizes it.
Source: the sglang 0.5.23 release wheel (``pip download --no-deps sglang==0.5.23``), files under ``sglang/srt/``.
"""

from __future__ import annotations

from dataclasses import replace

import kvplan.engines.sglang as sglang
from kvplan.engines.common import Demand, Knob, Pool, PoolPlan, Term
from kvplan.engines.sglang_hybrid_sizer import HYBRID_VERSION, SWA_EVICTION_INTERVAL
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import FullAttention, SlidingWindow
from kvplan.models.deploy import Deployment
from kvplan.versions import parse_version

HYBRID_SWA_ARCHS = frozenset({
    "BeamForCausalLM", "Llama4ForConditionalGeneration", "GptOssForCausalLM", "GraniteSWAForCausalLM",
    "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM", "IQuestQ1MTP", "MiMoV2MTP", "Step3p5ForCausalLM",
    "Step3p5MTP", "Step3p7ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
    "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
    "LagunaForCausalLM", "MellumForCausalLM", "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
    "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP", "UnlimitedOCRForCausalLM",
})  # fmt: skip
"""``configs/model_config.py`` ``is_hybrid_swa_model``: the architectures SGLang gives a SWA pool (with
``SWA_SINK_ARCHS``; DeepSeek-V4 and MiMo-V2 are read elsewhere). Any other architecture's sliding layers are sized
by ``DefaultPoolConfigurator`` as full attention, one row per token on every layer."""


def planned_here(arch: ModelArch) -> bool:
    """Every layer slides, or the layers are full attention and sliding windows of an architecture SGLang does not
    give a SWA pool (both sized here); the other hybrids are kvplan.engines.sglang_hybrid's."""
    if all_sliding(arch):
        return True
    plain = all(type(c) in (FullAttention, SlidingWindow) for layer in arch.layers for c in layer.caches)
    return plain and arch.architecture not in HYBRID_SWA_ARCHS


def all_sliding(arch: ModelArch) -> bool:
    """True when every layer's only cache is a sliding window (SGLang: ``full_attention_layer_ids == []``)."""
    return bool(arch.layers) and all(
        layer.window is not None and layer.caches == (layer.window,) for layer in arch.layers
    )


def _refuse(arch: ModelArch, dep: Deployment, why: str) -> PlanError:
    return PlanError(f"kvplan does not yet plan {why} ({arch.name}) on SGLang {dep.engine_version}")


# Where the all-SWA pool is sized in SGLang 0.5.23:
#
# ``configs/model_config.py`` ``get_hybrid_layer_ids`` reads ``layer_types``: every layer ``sliding_attention``
# gives ``full_attention_layer_ids = []``, and ``create_memory_pool_configurator`` still picks
# ``HybridSWAPoolConfigurator`` (``is_hybrid_swa``; ``SWARequestCapPoolConfigurator.is_applicable`` wants a full
# layer). Its all-SWA branch (``_recompute_cell_size`` / ``_solve_pool_sizes``, "full_layers == 0"):
#
#     cell_size      = swa_per_token × swa_layers           (no swa_full_tokens_ratio: no full pool to relate to)
#     max_total      = int(available // cell_size)
#     swa_tokens     = max_total // page × page             (max_total_num_tokens = swa_max_total_num_tokens)
#     full tokens    = 0
#     log: "Use sliding window memory pool (all SWA). swa_layer_tokens={swa}"
#
# ``validate_swa_pool_size`` is not called on this branch. ``--max-total-tokens`` caps through
# ``calculate_pool_sizes_from_max_tokens`` -> the same ``_solve_pool_sizes``: swa_tokens = cap // page × page.
# ``kv_cache_configurator.py`` builds ``SWAKVPool`` (a zero-layer full sub-pool: no buffers, ``memory_pool.py``
# "Zero-layer pool (e.g. all-SWA model's full sub-pool) has no buffers") and ``PureSWATokenToKVPoolAllocator`` over
# swa_tokens; the scheduler's prefill budget counts the SWA pool (``prefill_budget.SWAPrefillBudget(all_swa=True)``),
# the radix cache is ``PureSWARadixCache``. That is the uniform memory chain of kvplan.engines.sglang.plan_pools over
# the sliding layers, told here as one sliding-window pool.
#
# Only the architectures ``is_hybrid_swa_model`` lists get a SWA pool (``HYBRID_SWA_ARCHS``); any other model whose
# ``layer_types`` mark sliding layers (e.g. Qwen3 or Gemma 3 with ``layer_types``) is sized by
# ``DefaultPoolConfigurator`` over every layer, the window applied by the attention kernel only: one full pool.
def plan(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The all-SWA pool SGLang 0.5.23 builds on each GPU (module docstring)."""
    if arch.architecture not in HYBRID_SWA_ARCHS:
        return _as_full_attention(arch, dep)
    if parse_version(dep.engine_version) != HYBRID_VERSION:
        raise _refuse(arch, dep, "an all-sliding-window model (read from SGLang 0.5.23 only: engine_version=0.5.23)")
    if dep.mtp:
        raise _refuse(arch, dep, "speculative decoding with an all-sliding-window model (draft SWA pools)")
    if dep.dcp > 1:
        raise _refuse(arch, dep, f"dcp {dep.dcp} with an all-sliding-window model")
    windows = {layer.window for layer in arch.layers}  # planned_here: every layer's one cache is its window
    if len(windows) > 1:
        raise _refuse(arch, dep, "sliding-window layers of different shapes")
    sw = next(iter(windows))
    assert sw is not None
    # the sliding layers as a uniform model: plan_pools' cell = swa_per_token × swa_layers, rows = SGLang's swa_tokens
    view = replace(arch, num_layers=len(arch.layers), layers=(), num_mtp_layers=0)
    att = view.attention
    if not isinstance(att, FullAttention) or (att.num_kv_heads, att.head_dim, att.v_head_dim) != (
        sw.num_kv_heads,
        sw.head_dim,
        sw.v_head_dim,
    ):
        raise _refuse(arch, dep, f"sliding-window layers unlike the config's fields ({sw})")
    return _told_as_swa(sglang.plan_pools(view, dep, None), arch, sw)


def _told_as_swa(p: PoolPlan, arch: ModelArch, sw: SlidingWindow) -> PoolPlan:
    """The uniform plan of the sliding layers, told as SGLang's all-SWA pool: one pool, its knobs, terms, notes."""
    page, layers = p.page_tokens, p.main_layers
    dep = p.deployment
    interval = SWA_EVICTION_INTERVAL if dep.swa_eviction_interval is None else dep.swa_eviction_interval
    span = sw.window + interval
    pool = Pool(
        name=f"sliding window ({layers} layers, all SWA)",
        unit="page",
        page_tokens=page,
        capacity=p.usable_pages,
        unit_bytes=p.cell.total_bytes * page,
        # compute_swa_request_cap: a running request keeps window + eviction interval tokens + 2 pages (as a hybrid)
        demands=(Demand("sliding-window", "window", window=span, extra=2),),
    )
    ratio = p.deployment.swa_full_tokens_ratio
    knobs = list(p.knobs)
    if ratio is not None:
        knobs.append(Knob("swa_full_tokens_ratio", ratio, "set; not applied: an all-SWA model has no full pool"))
    chain = tuple(_swa_term(t, p) for t in p.chain)
    notes = (
        *p.notes,
        f"all {layers} layers slide: SGLang sizes one SWA pool (HybridSWAPoolConfigurator, all SWA) of "
        f"{p.rows:,} tokens and no full-attention pool; swa_full_tokens_ratio is not applied",
        f"SWA pool: a request keeps at most its window {sw.window} + {interval} tokens "
        "(SGLANG_SWA_EVICTION_INTERVAL) + 2 pages there; ASSUMPTION: radix cache on (SGLang's default)",
    )
    extras = {**p.extras, "swa_tokens": p.rows, "swa_alloc_bytes": p.extras["mla_alloc_bytes"], "full_tokens": 0}
    return replace(p, arch=arch, pools=(pool,), knobs=tuple(knobs), chain=chain, notes=notes, extras=extras)


def _swa_term(t: Term, p: PoolPlan) -> Term:
    if t.label == "cell":
        return Term("cell", t.bytes, f"bytes per SWA pool row ({p.main_layers} sliding layers, no ratio)")
    if t.label == "pool rows per GPU":
        page = p.page_tokens
        return Term(t.label, None, f"{p.rows:,} = int(available // cell) // {page} × {page} (swa_layer_tokens)")
    return t


def _as_full_attention(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """Not ``is_hybrid_swa``: SGLang sizes one full-attention pool over every layer, the window kept by the kernel
    only (``DefaultPoolConfigurator``): a request takes a row per token on every layer."""
    view = replace(arch, layers=())
    p = sglang.plan_pools(view, dep, None)
    said = (
        f"{arch.architecture} is not in SGLang's is_hybrid_swa_model list: its sliding-window layers get a "
        "full-attention pool (one row per token on every layer, no SWA pool)"
    )
    return replace(p, notes=(*p.notes, said))

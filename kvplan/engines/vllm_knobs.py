"""vLLM knobs that reshape the pool beyond the memory budget: --dtype, --async-scheduling,
--num-gpu-blocks-override, --disable-hybrid-kv-cache-manager and --max-model-len -1 (auto-fit).

Source: vllm-project/vllm ``vllm/v1/core/kv_cache_utils.py`` (``get_kv_cache_configs``, ``may_override_num_blocks``,
``unify_hybrid_kv_cache_specs``, ``_estimate_max_model_len_from_groups``, ``_auto_fit_max_model_len``) and
``vllm/config/model.py _resolve_auto_dtype``; the conformance suite tests/conformance/test_vllm_kv_cache_utils.py
ports vLLM's own tests of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines.common import Knob
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import FullAttention
from kvplan.models.deploy import AUTO_FIT, Deployment
from kvplan.versions import parse_version

_DTYPE_NAMES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32"}


def kv_dtype(dep: Deployment) -> tuple[str, str]:
    """(kv dtype, why) of a full-attention cache: ``kv_cache_dtype auto`` is the model dtype (``--dtype``).

    --dtype auto takes the config's torch_dtype, a float32 checkpoint downcast to the platform's first dtype
    (bf16 from SM80, fp16 before: ``_resolve_auto_dtype`` "Downcast for float32 models"): 2 bytes either way.
    Only an explicit --dtype float32 caches 4-byte elements.
    """
    if dep.kv_cache_dtype != "auto":
        return dep.kv_cache_dtype, "set"
    if dep.dtype == "auto":
        return "auto", "default: auto = the model dtype (torch_dtype; float32 checkpoints downcast to bf16)"
    name = _DTYPE_NAMES.get(dep.dtype, dep.dtype)
    return name, f"default: auto = --dtype {dep.dtype}"


ASYNC_DEFAULT_SINCE = (0, 14, 0)
"""vllm-project/vllm#27614 turned async scheduling on by default (ASSUMPTION on the release: 0.14.0, as
deepjavalibrary/djl#3833 reports); it changes kvplan's figures only from 0.26.0, where a window holds in-flight
tokens."""


def async_scheduling(dep: Deployment) -> Knob:
    """--async-scheduling / --no-async-scheduling, else the version's default (``ASYNC_DEFAULT_SINCE``)."""
    if dep.async_scheduling is not None:
        return Knob("async_scheduling", dep.async_scheduling, "set")
    on = parse_version(dep.engine_version) >= ASYNC_DEFAULT_SINCE
    return Knob("async_scheduling", on, f"default: {'on' if on else 'off'} in vLLM {dep.engine_version} (#27614)")


def refuse_on_v0(dep: Deployment) -> None:
    """The V0 engine (vLLM 0.6-0.8, kvplan/engines/vllm_v0.py) is planned without these knobs: refuse them."""
    given = [
        k for k in ("num_gpu_blocks_override", "async_scheduling", "flashinfer_sampler") if getattr(dep, k) is not None
    ]
    given += ["dtype float32"] * (dep.dtype in ("float", "float32"))
    given += ["disable_hybrid_kv_cache_manager"] * dep.disable_hybrid_kv_cache_manager
    given += ["context_length -1 (auto-fit)"] * (dep.context_length == AUTO_FIT)
    # data-parallel attention came with the V1 engine (vLLM 0.8 "Data Parallel" for V1): V0 would be a wrong pool
    given += [f"dp_attention {dep.dp_attention}"] * (dep.dp_attention > 1)
    if given:
        raise PlanError(f"kvplan's vLLM {dep.engine_version} (V0 engine) plan does not model {', '.join(given)}")


def max_concurrent_batches(dep: Deployment) -> int:
    """``VllmConfig.max_concurrent_batches``: 2 with async scheduling at pp 1, else pp (the V1 model runner)."""
    if async_scheduling(dep).value and dep.pp <= 1:
        return 2
    return max(dep.pp, 1)


UNIFIED_NOTE = (
    "vLLM --disable-hybrid-kv-cache-manager: the sliding-window layers are cached as full attention, one KV cache "
    "group of every layer (unify_hybrid_kv_cache_specs); attention compute still slides"
)


def unified_to_full(arch: ModelArch, dep: Deployment) -> bool:
    """True when --disable-hybrid-kv-cache-manager turns every sliding-window layer into full attention.

    ``unify_hybrid_kv_cache_specs``: a model whose specs are already uniform (every layer sliding, or none) is left
    as it is; full attention beside sliding windows becomes full attention on every layer (one group); anything
    else cannot be unified and vLLM refuses it.
    """
    if not dep.disable_hybrid_kv_cache_manager or not arch.is_hybrid:
        return False
    kinds = {c.spec for layer in arch.layers for c in layer.caches}
    if kinds == {"window"}:
        return False
    if kinds == {"full", "window"}:
        return True
    raise PlanError(
        "vLLM refuses it: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one "
        f"unified type ({' + '.join(arch.hybrid_kinds)} layers)"
    )


def override_blocks(dep: Deployment, num_blocks: int, bytes_per_block: int, available: int) -> tuple[int, int]:
    """(num_blocks, the memory vLLM checks against) after --num-gpu-blocks-override.

    ``get_kv_cache_configs``: the override replaces the memory with override × bytes_per_block, so the start
    check and the auto-fit see the capped pool ("Overriding num_gpu_blocks=%d with num_gpu_blocks_override=%d").
    """
    if dep.num_gpu_blocks_override is None:
        return num_blocks, available
    return dep.num_gpu_blocks_override, dep.num_gpu_blocks_override * bytes_per_block


@dataclass(frozen=True)
class Fitted:
    """max_model_len after vLLM's auto-fit, with the knob that says how it was found."""

    max_model_len: int
    knob: Knob
    error: str | None


def auto_fit(derived: int, estimate: int, check_bytes: int) -> Fitted:
    """--max-model-len -1: the longest length whose blocks fit the memory less the null block, at most the
    model's derived length (``_auto_fit_max_model_len``, the binary search of ``_estimate_max_model_len_from_groups``
    over [1, derived])."""
    gib = f"{round(check_bytes / 2**30, 2)} GiB GPU"
    if estimate <= 0:
        error = (
            "Cannot auto-fit max_model_len: not enough KV cache memory for even one token "
            f"({gib}); vLLM refuses to start"
        )
        return Fitted(derived, Knob("context_length", derived, "default: auto-fit found no length"), error)
    fitted = min(estimate, derived)
    why = (
        f"auto-fit (max_model_len -1): full model context length {derived:,} fits in {gib}"
        if fitted == derived
        else f"auto-fit (max_model_len -1): reduced from {derived:,} to {fitted:,} to fit in {gib}"
    )
    return Fitted(fitted, Knob("context_length", fitted, f"default: {why}"), None)


def shown(dep: Deployment) -> tuple[Knob, ...]:
    """These knobs as the plan's knob table shows them (the override only when given)."""
    explicit = dep.explicit
    out = [
        Knob("dtype", dep.dtype, "set" if "dtype" in explicit else "default: auto = the config's torch_dtype"),
        async_scheduling(dep),
    ]
    if dep.num_gpu_blocks_override is not None:
        out.append(Knob("num_gpu_blocks_override", dep.num_gpu_blocks_override, "set"))
    if dep.flashinfer_sampler is not None:
        out.append(Knob("flashinfer_sampler", dep.flashinfer_sampler, "set"))
    hma = "set" if "disable_hybrid_kv_cache_manager" in explicit else "default: the hybrid KV cache manager is on"
    out.append(Knob("disable_hybrid_kv_cache_manager", dep.disable_hybrid_kv_cache_manager, hma))
    return tuple(out)


def per_layer_bytes(arch: ModelArch, attn_tp: int, dtype: str) -> int:
    """Σ over layers of one token's K + V on one rank when kv heads differ by layer (DeciLM), else 0.

    vLLM: every layer a FullAttentionSpec of its own heads (max(1, heads // tp) a rank), pages of different sizes
    in one ``UniformTypeKVCacheSpecs`` group: a block holds every layer's page (``_get_kv_cache_bytes_per_block``).
    """
    if not arch.kv_heads_per_layer:
        return 0
    att = arch.attention
    assert isinstance(att, FullAttention)
    return sum(replace(att, num_kv_heads=h).bytes_per_token(attn_tp, dtype) for h in arch.kv_heads_per_layer if h)

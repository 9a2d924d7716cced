"""HOW an engine turns a deployment into pools (pure)."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines import pipeline
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import with_rope_scaling
from kvplan.engines.load_checks import load_refusal, refusal_text
from kvplan.engines.online_quant import with_online_quant
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import CompressedAttention, FullAttention, IndexerK, LinearState, MlaLatent, SlidingWindow
from kvplan.models.deploy import Deployment

ENGINE_CACHE_KINDS: dict[str, tuple[type, ...]] = {
    "sglang": (FullAttention, MlaLatent, IndexerK, SlidingWindow, LinearState, CompressedAttention),
    "vllm": (FullAttention, MlaLatent, IndexerK, SlidingWindow, LinearState, CompressedAttention),
}
"""The cache kinds (kvplan.models.cache) each engine's rules plan today: full attention, MLA and the DSA indexer
K. Issue 13's engine rules add SlidingWindow, LinearState and CompressedAttention here as they land."""


def refuse_unplanned_kinds(arch: ModelArch, dep: Deployment) -> None:
    """One line, exit 2, for a model with a cache kind the engine's rules do not plan yet (never a wrong pool).

    Exact types: a SlidingWindow is a FullAttention subclass but not planned as one; an indexer on compressed
    tokens (DeepSeek-V4) is not the DSA indexer either.
    """
    if dep.engine == "sglang" and dep.dtype in ("float", "float32"):  # auto, float16, bfloat16: a 2-byte KV
        raise InputError(f"kvplan does not yet plan --dtype {dep.dtype} (a 4-byte KV cache) on SGLang")
    if dep.engine == "sglang" and len(set(arch.kv_heads_per_layer)) > 1:
        raise InputError(
            f"kvplan does not yet plan per-layer kv heads ({arch.name}: block_configs) on SGLang {dep.engine_version}"
        )
    planned = ENGINE_CACHE_KINDS.get(dep.engine, ())
    for layer in arch.layers:
        for c in layer.caches:
            v4_indexer = isinstance(c, IndexerK) and c.compress_ratio > 1
            if type(c) not in planned or (v4_indexer and CompressedAttention not in planned):
                engine = {"sglang": "SGLang", "vllm": "vLLM"}.get(dep.engine, dep.engine)
                what = getattr(c, "kind_name", c.label)
                raise InputError(
                    f"kvplan does not yet plan {what} layers ({arch.name}, layer {layer.index}) on {engine}"
                    f" {dep.engine_version}: issue 13 engine rules"
                )


def plan_pool(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pool the deployment's engine builds on each GPU (under pp, on each GPU of the binding stage); a layout
    the engine refuses while building the model (kvplan.engines.load_checks) keeps the pool it would have tried to
    build, with the engine's message as its startup error (that refusal comes before any memory is profiled, so it
    wins over a memory one)."""
    refuse_unplanned_kinds(arch, dep)
    arch = with_online_quant(arch, dep)  # vLLM --quantization fp8: the weights as loaded
    read = with_rope_scaling(arch, dep)  # the model as the engine reads it; the plan keeps it as given
    plan = pipeline.plan_stages(read, dep, _plan_one)
    # a pp plan keeps its binding stage's view of the model (its layers and weights), rope-scaled as read
    return plan if plan.arch.pp_stage is not None else replace(plan, arch=arch)


def _plan_one(arch: ModelArch, dep: Deployment) -> PoolPlan:
    if dep.engine == "sglang":
        from kvplan.engines import sglang

        plan = sglang.plan(arch, dep)
    else:
        from kvplan.engines import vllm

        plan = vllm.plan(arch, dep)
    refused = load_refusal(arch, plan.deployment)  # as the engine adjusted it (SGLang forces DP attention for DSA)
    if refused is None:
        return plan
    return replace(plan, startup_error=refusal_text(plan.deployment, refused))

"""HOW an engine turns a deployment into pools (pure)."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines import pipeline
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import with_rope_scaling
from kvplan.engines.load_checks import load_refusal, refusal_text
from kvplan.engines.model_dtype import with_model_dtype
from kvplan.engines.online_quant import with_online_quant
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.validate import refuse_unplanned
from kvplan.versions import vllm_rules


def plan_pool(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pool the deployment's engine builds on each GPU (under pp, on each GPU of the binding stage); a layout
    the engine refuses while building the model (kvplan.engines.load_checks) keeps the pool it would have tried to
    build, with the engine's message as its startup error (that refusal comes before any memory is profiled, so it
    wins over a memory one)."""
    refuse_unplanned(arch, dep)
    arch = with_model_dtype(arch, dep)  # --dtype: unquantized weights in the model dtype, not torch_dtype
    arch = with_online_quant(arch, dep)  # vLLM --quantization fp8: the weights as loaded
    read = with_rope_scaling(arch, dep)  # the model as the engine reads it; the plan keeps it as given
    plan = pipeline.plan_stages(read, dep, _plan_one)
    # a pp plan keeps its binding stage's view of the model (its layers and weights), rope-scaled as read
    return plan if plan.arch.pp_stage is not None else replace(plan, arch=arch)


def _engine_plan(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The chain that plans the deployment: SGLang's uniform, all-SWA or hybrid chain (the hybrid one runs the
    uniform memory chain with its sizer, DeepSeek-V4 included), vLLM's V0 or V1 engine. Each chain is imported
    only when it runs, so a plan on one engine loads none of the other's modules."""
    if dep.engine == "sglang":
        from kvplan.engines import sglang

        if not arch.is_hybrid:
            return sglang.plan_pools(arch, dep, None)
        from kvplan.engines import sglang_allswa, sglang_hybrid

        if sglang_allswa.planned_here(arch):
            return sglang_allswa.plan(arch, dep)
        return sglang_hybrid.plan(arch, dep)
    if vllm_rules(dep.engine_version).v0_budget:  # vLLM 0.6-0.8: the V0 engine's arithmetic
        from kvplan.engines import vllm_knobs, vllm_v0

        vllm_knobs.refuse_on_v0(dep)
        return vllm_v0.plan(arch, dep, vllm_rules(dep.engine_version))
    from kvplan.engines import vllm

    return vllm.plan(arch, dep)


def _plan_one(arch: ModelArch, dep: Deployment) -> PoolPlan:
    plan = _engine_plan(arch, dep)
    refused = load_refusal(arch, plan.deployment)  # as the engine adjusted it (SGLang forces DP attention for DSA)
    if refused is None:
        return plan
    return replace(plan, startup_error=refusal_text(plan.deployment, refused), startup_refusal=None)

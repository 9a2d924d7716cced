"""HOW an engine turns a deployment into pools (pure)."""

from __future__ import annotations

from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment


def plan_pool(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pool the deployment's engine builds on each GPU."""
    if dep.engine == "sglang":
        from kvplan.engines import sglang

        return sglang.plan(arch, dep)
    from kvplan.engines import vllm

    return vllm.plan(arch, dep)

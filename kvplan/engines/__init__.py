"""HOW an engine turns a deployment into pools (pure)."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.common import PoolPlan
from kvplan.engines.context import with_rope_scaling
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
    """The pool the deployment's engine builds on each GPU."""
    refuse_unplanned_kinds(arch, dep)
    read = with_rope_scaling(arch, dep)  # the model as the engine reads it; the plan keeps it as given
    if dep.engine == "sglang":
        from kvplan.engines import sglang

        return replace(sglang.plan(read, dep), arch=arch)
    from kvplan.engines import vllm

    return replace(vllm.plan(read, dep), arch=arch)

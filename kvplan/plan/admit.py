"""Is a request of ``ctx`` (+ ``gen``) tokens, N at a time, admitted by the pool? (pure)

The checks, in the order the engine applies them:
1. the engine starts at all (vLLM's max-model-len check; SGLang's "no memory for the KV cache");
2. context length: ctx <= context_len (SGLang --context-length, vLLM max_model_len); with --gen, the prompt and
   its output by the engine's own rule (kvplan.lengths);
3. pool: N × pages(ctx + gen) <= usable pages (SGLang: all pages; vLLM: num_blocks − 1 for the null block);
4. running requests: N <= max_running_requests (SGLang) / max_num_seqs (vLLM);
5. workspaces: req_to_token, CUDA graphs, indexer logits and top-k buffers fit in the room outside the pool
   at this batch and context (kvplan.plan.workspace).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.common import PoolPlan
from kvplan.plan.admission import (
    LOGGED_POOL,
    PLANNED_POOL,
    Admission,
    Check,
    MainOnlyClaim,
    Remedy,
    Request,
    assess,
    dp_ranks,
    largest_admitted,
    largest_ctx_for,
    per_dp_rank,
    pools_hold,
    with_pool_tokens,
)
from kvplan.plan.remedies import find_remedies, memory_remedy

__all__ = [
    "LOGGED_POOL",
    "PLANNED_POOL",
    "Admission",
    "Check",
    "MainOnlyClaim",
    "Remedy",
    "Request",
    "admit",
    "dp_ranks",
    "find_remedies",
    "largest_admitted",
    "largest_ctx_for",
    "memory_remedy",
    "per_dp_rank",
    "pools_hold",
    "with_pool_tokens",
]


def admit(plan: PoolPlan, req: Request, *, pool_source: str = "planned", remedies: bool = True) -> Admission:
    """The verdict (:func:`kvplan.plan.admission.assess`) and, when rejected, the changes that admit it."""
    result = assess(plan, req, pool_source=pool_source)
    if remedies and not result.admitted:
        result = replace(result, remedies=tuple(find_remedies(plan, req)))
    return result

"""SGLang's request limits for a pool plan: the context length (refused over the model's unless allowed), the
running requests (set, 48 with speculative decoding, else SGLang's estimate; a hybrid's state slots cap them) and
the req_to_token table they size (pure).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan import record
from kvplan.engines.common import Knob, resolve
from kvplan.engines.context import long_context_note
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.versions import parse_version

if TYPE_CHECKING:
    from kvplan.engines.hybrid_steps import HybridSteps  # a type only: the chain loads no hybrid module

SPEC_MAX_RUNNING_REQUESTS = 48
"""max_running_requests when speculative decoding (EAGLE, EAGLE3, NEXTN) runs and none is given: SGLang 0.5.23
``arg_groups/speculative_hook.py`` ``_handle_eagle_family`` ("Max running requests is reset to 48 for speculative
decoding."); ``ServerArgs.__post_init__`` from the 0.4.5 wheel (``if self.max_running_requests is None:
self.max_running_requests = 48`` under EAGLE); the 0.4.4 wheel has no such default."""
SPEC_RUNNING_SINCE = (0, 4, 5)


# ---- requests: the context length, the running requests (a hybrid's state slots cap them), req_to_token


@record
class Requests:
    context: Knob
    context_len: int
    running: Knob
    mrr: int
    req_to_token_bytes: int
    startup_error: str | None


def requests(
    arch: ModelArch,
    dep: Deployment,
    hybrid: HybridSteps | None,
    rows: int,
    logged: int,
    startup_error: str | None,
    state_slots: int,
    page: int,
    notes: list[str],
) -> Requests:
    """--context-length (refused over the model's unless allowed), max_running_requests, the req_to_token table."""
    ctx_k = resolve(dep, "context_length", arch.max_position_embeddings, "max_position_embeddings")
    context_len = ctx_k.as_int()
    error = startup_error
    if context_len > arch.max_position_embeddings and dep.allow_long_context:
        notes.append(long_context_note(arch, dep, context_len))
    elif context_len > arch.max_position_embeddings:
        # configs/model_config.py: refused while the model config is built, before any memory is profiled
        error = (
            f"User-specified context_length ({context_len}) is greater than the derived context_length "
            f"({arch.max_position_embeddings}). This may lead to incorrect model outputs or CUDA errors. "
            "To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
        )
    state_cap = hybrid.running_cap(state_slots) if hybrid is not None and rows else None
    mrr_k, mrr = _running(dep, hybrid, rows, context_len, state_cap, notes)
    if state_cap is not None and hybrid is not None:
        mrr_k, capped_said, cap_error = hybrid.cap_note(mrr_k, mrr, state_cap, state_slots)
        notes += capped_said
        error = error or cap_error
    extra = req_to_token_extra(dep, page)
    if logged and logged < context_len:
        notes.append(f"KV pool holds {logged:,} tokens, fewer than --context-length {context_len:,}.")
    return Requests(ctx_k, context_len, mrr_k, mrr, (mrr + 1) * (context_len + extra) * 4, error)


def req_to_token_extra(dep: Deployment, page: int) -> int:
    """Columns a req_to_token row holds beyond the context length: SGLang 0.5.23 ``mem_cache/allocation_sizing.py
    get_req_to_token_extra_context_len``: 4 + draft tokens; with speculative decoding and an allocation page
    (page × dcp, ``get_alloc_page_size``) over 1, at least the decode reserve (``get_alloc_reserve_per_decode``:
    2 × ``get_alloc_len_per_decode``) + page − 1, as a page-aligned allocation near the limit overshoots."""
    draft = dep.speculative_num_draft_tokens
    extra = 4 + draft
    alloc_page = page * dep.dcp
    if not draft or alloc_page <= 1:
        return extra
    steps, topk = max(draft - 1, 1), dep.speculative_eagle_topk or 1  # kvplan's MTP: a chain of draft − 1 steps
    per_decode = max(steps * topk, draft)
    if topk > 1:  # a tree at page > 1: each branch's page-aligned footprint
        per_decode = max((alloc_page - 1 + steps + alloc_page - 1) // alloc_page * alloc_page * topk, draft)
    return max(extra, 2 * per_decode + alloc_page - 1)


def _running(
    dep: Deployment, hybrid: HybridSteps | None, rows: int, context_len: int, state_cap: int | None,
    notes: list[str],
) -> tuple[Knob, int]:  # fmt: skip
    """max_running_requests: set (per dp worker, at most rows // 2), 48 with speculative decoding, else SGLang's
    estimate; the state slots' cap applied (the knob keeps the uncapped figure: ``cap_note`` words it)."""
    if dep.max_running_requests is not None:
        mrr = min(max(1, dep.max_running_requests // dep.dp_attention), rows // 2)
        mrr_k = Knob("max_running_requests", mrr, "set")
        if state_cap is not None and state_cap < mrr:
            mrr = state_cap
        elif mrr < dep.max_running_requests // dep.dp_attention:
            notes.append(
                f"max_running_requests was reduced from the requested {dep.max_running_requests} "
                f"to {mrr} (per dp worker) due to the available KV cache capacity"
            )
        return mrr_k, mrr
    if dep.mtp and hybrid is None and parse_version(dep.engine_version) >= SPEC_RUNNING_SINCE:
        mrr = min(max(1, SPEC_MAX_RUNNING_REQUESTS // dep.dp_attention), rows // 2)
        why = (f'default: {SPEC_MAX_RUNNING_REQUESTS} with speculative decoding (per dp worker, at most rows // 2): '
               '"Max running requests is reset to 48 for speculative decoding."')  # fmt: skip
        return Knob("max_running_requests", mrr, why), mrr
    mrr = min(min(max(int(rows / context_len * 512), 2048), 4096), rows // 2)
    mrr_k = Knob(
        "max_running_requests", mrr, "default: min(clamp(int(rows / context_len × 512), 2048, 4096), rows // 2)"
    )
    return mrr_k, (mrr if state_cap is None else min(mrr, state_cap))

"""Remedies for a request over the context length, past what the model's config derives: the engines' own ways.

- The RoPE scaling the model card documents (kvplan.models.rope; Qwen3: YaRN × 4 from 32,768 to 131,072), as
  each engine takes it: vLLM ``--hf-overrides '{"rope_scaling": ...}'`` derives max_model_len = original ×
  factor itself (``_get_and_verify_max_len``); SGLang ``--json-model-override-args`` with ``--context-length``
  and ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``, since its ``get_context_length`` drops the factor when
  ``original_max_position_embeddings`` is given (kvplan.engines.context).
- Beyond anything documented: the context length above the derived one with the engine's env var
  (``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN`` / ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``), which the engine allows
  with a warning: outputs past the model's positions are not guaranteed.

Each is re-planned by the caller (``attempt``) and offered only if the re-planned deployment admits the request.
"""

from __future__ import annotations

from collections.abc import Callable

from kvplan import record
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import model_positions, yarn_positions

Attempt = Callable[..., PoolPlan | None]
"""Re-plan with ``--set`` changes; the new plan if it admits the request, else None."""


@record
class ContextChange:
    sets: tuple[tuple[str, object], ...]
    """The knobs, the first one the remedy's own."""
    plan: PoolPlan
    detail: str


def _yarn(plan: PoolPlan, total: int, attempt: Attempt) -> ContextChange | None:
    rs = plan.arch.documented_rope_scaling
    if rs is None or plan.deployment.rope_scaling is not None or total > rs.context_tokens:
        return None
    card = (
        f"the model card's {rs.rope_type} × {rs.factor:g} ({rs.original_max_position_embeddings:,} -> "
        f"{rs.context_tokens:,} positions; static: it scales short requests too)"
    )
    if plan.engine == "vllm":
        # vLLM derives max_model_len = original × factor; at start the pool must hold it, else cut it to the request
        tries: tuple[tuple[tuple[str, object], ...], ...] = (
            (("rope_scaling", rs.rope_type),), (("rope_scaling", rs.rope_type), ("context_length", total)),
        )  # fmt: skip
        for sets in tries:
            if (new := attempt(**dict(sets))) is not None:
                flag = f"--hf-overrides '{rs.override_json()}'" + (f" --max-model-len {total}" if len(sets) > 1 else "")
                return ContextChange(sets, new, f"vLLM {flag}: {card}")
        return None
    knobs: tuple[tuple[str, object], ...] = (
        ("rope_scaling", rs.rope_type), ("context_length", rs.context_tokens), ("allow_long_context", True),
    )  # fmt: skip
    if (new := attempt(**dict(knobs))) is None:
        return None
    flag = f"--json-model-override-args '{rs.override_json()}' --context-length {rs.context_tokens}"
    why = "get_context_length drops the factor when original_max_position_embeddings is given"
    return ContextChange(knobs, new, f"SGLang {flag} with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 ({why}): {card}")


def _env_override(plan: PoolPlan, total: int, attempt: Attempt) -> ContextChange | None:
    allowed = plan.deployment.allow_long_context  # already set: only the length is left to raise
    sets: tuple[tuple[str, object], ...] = (("context_length", total),) + (
        () if allowed else (("allow_long_context", True),)
    )
    if (new := attempt(**dict(sets))) is None:
        return None
    var = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" if plan.engine == "sglang" else "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    flag = "--context-length" if plan.engine == "sglang" else "--max-model-len"
    head = f"{var}=1 {flag} {total}: past the {model_positions(plan):,} the engine derives"
    shipped, card = yarn_positions(plan.arch.config_rope), plan.arch.documented_rope_scaling
    if shipped is not None and total <= shipped:  # SGLang drops a shipped YaRN's factor; the scaling is there
        why = f"{head} (get_context_length drops the yarn factor), within the {shipped:,} the config's yarn covers"
        return ContextChange(sets, new, why)
    covers = f" and the {card.context_tokens:,} its card's {card.rope_type} covers" if card is not None else ""
    warn = ": quality is not guaranteed (the engine warns of incorrect outputs or CUDA errors)"
    return ContextChange(sets, new, head + covers + warn)


def context_remedies(plan: PoolPlan, total: int, attempt: Attempt) -> list[ContextChange]:
    """The engine's own ways past the derived context (the caller offers ``context_length`` up to it): the
    documented RoPE scaling where it covers the request, else the env var that lets a longer context start."""
    if total <= model_positions(plan):
        return []
    yarn = _yarn(plan, total, attempt)
    if yarn is not None:
        return [yarn]
    env = _env_override(plan, total, attempt)
    return [env] if env is not None else []

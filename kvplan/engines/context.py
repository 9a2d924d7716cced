"""The context length an engine derives from the model config: its own ``rope_scaling``, or the one the model
card documents once the deployment turns it on (``rope_scaling: yarn``, passed as SGLang
``--json-model-override-args`` / vLLM ``--hf-overrides``, which replace the config's mapping).

- vLLM ``_get_and_verify_max_len`` (config/model.py): unless the type is su / longrope / llama3, the derived
  max_model_len is × factor, on ``original_max_position_embeddings`` for yarn (Qwen3's YaRN × 4: 32,768 × 4 =
  131,072), and ``max_model_len`` defaults to it.
- SGLang ``get_context_length`` (srt/utils/hf_transformers_utils.py): × factor, but the factor is dropped when the
  mapping has ``original_max_position_embeddings`` (YaRN always has) or the type is llama3, so Qwen3's derived
  context_len stays max_position_embeddings (40,960); ``--context-length 131072`` above it needs
  ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` (``ModelConfig``).
- Both build YaRN's cos/sin cache over original × factor positions (``YaRNScalingRotaryEmbedding``).
"""

from __future__ import annotations

import json
from dataclasses import replace

from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch, ParamGroup
from kvplan.models.deploy import Deployment
from kvplan.models.rope import ConfigRope
from kvplan.models.weights import BufferGroup


def with_rope_scaling(arch: ModelArch, dep: Deployment) -> ModelArch:
    """The model as the engine reads it: the documented scaling in place of the config's where the deployment
    turns it on, the rotary cache YaRN builds, and ``max_position_embeddings`` (the one field the engines'
    context checks read) the context the engine derives."""
    if dep.rope_scaling is not None:
        rs = arch.documented_rope_scaling
        if rs is None or rs.rope_type != dep.rope_scaling:
            raise InputError(
                f"rope_scaling={dep.rope_scaling}: {arch.name} documents no {dep.rope_scaling} RoPE scaling "
                "(a model preset's documented_rope_scaling, with its source)"
            )
        rope = ConfigRope(rs.rope_type, rs.factor, rs.original_max_position_embeddings)
        override = json.loads(rs.override_json())  # a snapshot's engine additions re-read it (rotary cache)
        groups = tuple(g.with_config(override) for g in arch.param_groups)
        arch = replace(arch, config_rope=rope, param_groups=groups)
    yarn = yarn_positions(arch.config_rope)
    if yarn is not None and yarn != arch.max_position_embeddings and arch.max_position_embeddings > 0:
        groups = tuple(_rotary(g, arch.max_position_embeddings, yarn) for g in arch.param_groups)
        arch = replace(arch, param_groups=groups)
    derived = derived_context(arch, dep.engine)
    return arch if derived == arch.max_position_embeddings else replace(arch, max_position_embeddings=derived)


def derived_context(arch: ModelArch, engine: str) -> int:
    """The context length the engine derives from the config's ``rope_scaling`` (every shipped preset's: its
    max_position_embeddings; Qwen3 with the card's YaRN: 131,072 on vLLM, 40,960 on SGLang)."""
    rs, positions = arch.config_rope, arch.max_position_embeddings
    if rs is None:
        return positions
    factor = rs.factor if rs.factor is not None else 1.0
    if engine == "vllm":
        if rs.rope_type in ("su", "longrope", "llama3"):
            return positions
        base = rs.original_max_position_embeddings if rs.rope_type == "yarn" else positions
        return int((base if base is not None else positions) * factor)
    if rs.original_max_position_embeddings is not None or rs.rope_type == "llama3":
        return positions
    return int(factor * positions)


def yarn_positions(rs: ConfigRope | None) -> int | None:
    if rs is None or rs.rope_type != "yarn" or rs.factor is None or rs.original_max_position_embeddings is None:
        return None
    return int(rs.original_max_position_embeddings * rs.factor)


def _rotary(g: ParamGroup, positions: int, yarn: int) -> ParamGroup:
    """The cos/sin cache (kvplan.models.weights: max_position_embeddings × rotary dim) over YaRN's positions."""
    if isinstance(g, BufferGroup) and g.name == "rotary_cache":
        return replace(g, buffer_bytes=g.buffer_bytes // positions * yarn)
    return g


def derived_why(arch: ModelArch, dep: Deployment) -> str:
    """Where the default context length came from, for the knob's origin (``arch`` as the engine reads it)."""
    rs = arch.config_rope
    if dep.engine != "vllm" or yarn_positions(rs) is None or rs is None:
        return "max_position_embeddings"
    return (
        f"rope_scaling yarn: original_max_position_embeddings {rs.original_max_position_embeddings:,} × {rs.factor:g}"
    )


def long_context_note(arch: ModelArch, dep: Deployment, context_tokens: int) -> str:
    """What starting above the derived context means (the engine logs the warning and goes on)."""
    var = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" if dep.engine == "sglang" else "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    derived = arch.max_position_embeddings
    head = f"context length {context_tokens:,} is above the derived {derived:,}: the engine starts only with {var}=1"
    rs = arch.config_rope
    yarn = yarn_positions(rs)
    if rs is not None and yarn is not None and context_tokens <= yarn:
        return (
            f"{head} (get_context_length drops the yarn factor when original_max_position_embeddings is given); "
            f"yarn × {rs.factor:g} covers {yarn:,} positions"
        )
    return f"{head}, and outputs past the model's positions are not guaranteed (incorrect outputs or CUDA errors)"


def model_positions(plan: PoolPlan) -> int:
    """The positions the planned engine serves the model at: its derived context, with the deployment's RoPE
    scaling (the plan keeps the model as given)."""
    return with_rope_scaling(plan.arch, plan.deployment).max_position_embeddings

"""The context length an engine derives from the model config, with a documented RoPE scaling turned on.

- vLLM ``_get_and_verify_max_len`` (config/model.py): with ``rope_scaling`` of type yarn the derived
  max_model_len is ``original_max_position_embeddings × factor`` (131,072 for Qwen3's YaRN × 4), and
  ``max_model_len`` defaults to it.
- SGLang ``get_context_length`` (srt/utils/hf_transformers_utils.py): the factor is dropped when the mapping has
  ``original_max_position_embeddings`` (YaRN always has), so the derived context_len stays
  max_position_embeddings (40,960); ``--context-length 131072`` above it needs
  ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` (model_config.py), the scaling itself being the card's.
"""

from __future__ import annotations

import json
from dataclasses import replace

from kvplan.errors import InputError
from kvplan.models.additions import AdditionsGroup
from kvplan.models.arch import ModelArch, ParamGroup
from kvplan.models.deploy import Deployment
from kvplan.models.rope import RopeScaling
from kvplan.models.weights import BufferGroup


def with_rope_scaling(arch: ModelArch, dep: Deployment) -> ModelArch:
    """The model as the engine reads it once the deployment turns the documented scaling on: its derived
    context (``max_position_embeddings``, the one field the engines' context checks read) as the engine
    derives it."""
    if dep.rope_scaling is None:
        return arch
    rs = arch.documented_rope_scaling
    if rs is None or rs.rope_type != dep.rope_scaling:
        raise InputError(
            f"rope_scaling={dep.rope_scaling}: {arch.name} documents no {dep.rope_scaling} RoPE scaling "
            "(a model preset's documented_rope_scaling, with its source)"
        )
    arch = replace(
        arch, param_groups=tuple(_scaled_rope(g, arch.max_position_embeddings, rs) for g in arch.param_groups)
    )
    if dep.engine == "vllm":
        return replace(arch, max_position_embeddings=rs.context_tokens)
    return arch


def _scaled_rope(g: ParamGroup, positions: int, rs: RopeScaling) -> ParamGroup:
    """The rotary cos/sin cache as YaRN builds it in both engines (``YaRNScalingRotaryEmbedding``: original ×
    factor positions, not max_position_embeddings); a snapshot's engine additions read the overridden config."""
    if isinstance(g, BufferGroup) and g.name == "rotary_cache" and positions > 0:
        return replace(g, buffer_bytes=g.buffer_bytes // positions * rs.context_tokens)
    if isinstance(g, AdditionsGroup):
        override = json.loads(rs.override_json())
        return replace(g, config={**g.config, **override}, _memo={})
    return g


def derived_why(arch: ModelArch, dep: Deployment) -> str:
    """Where the default context length came from, for the knob's origin."""
    rs = arch.documented_rope_scaling
    if dep.rope_scaling is None or rs is None or dep.engine != "vllm":
        return "max_position_embeddings"
    original = rs.original_max_position_embeddings
    return f"rope_scaling {rs.rope_type}: original_max_position_embeddings {original:,} × {rs.factor:g}"


def long_context_note(arch: ModelArch, dep: Deployment, context_tokens: int) -> str:
    """What starting above the derived context means (the engine logs the warning and goes on)."""
    var = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" if dep.engine == "sglang" else "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    derived = arch.max_position_embeddings
    head = f"context length {context_tokens:,} is above the derived {derived:,}: the engine starts only with {var}=1"
    rs = arch.documented_rope_scaling
    if dep.rope_scaling is not None and rs is not None and context_tokens <= rs.context_tokens:
        return (
            f"{head} (get_context_length drops the {rs.rope_type} factor when original_max_position_embeddings is "
            f"given); the model card's {rs.rope_type} × {rs.factor:g} covers {rs.context_tokens:,} positions"
        )
    return f"{head}, and outputs past the model's positions are not guaranteed (incorrect outputs or CUDA errors)"

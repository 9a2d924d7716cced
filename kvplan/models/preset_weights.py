"""A preset's weights by the same path as its own config.json, so that one model never gets two weights.

A preset's ``config`` section holds the Hugging Face fields of the model's config.json (each preset's ``source``
names the file). Its weights used to be the MLA parameter groups (no norms, the MTP layer's embed/head, no engine
additions): DeepSeek-V3 planned 78.54 GiB a GPU at TP8 from its preset and 79.55 GiB from its config.json against
vLLM's published 79.74 GiB (tests/unit/test_weights_published.py). Now both go through
:func:`kvplan.models.checkpoint.with_checkpoint` (per tensor from the config, + the engine's load-time additions);
a config kvplan cannot lay out per tensor keeps its parameter groups either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kvplan.models.arch import ModelArch
from kvplan.models.weights import as_parameter_groups

PRESET_FP8_BLOCKS = {
    "quant_method": "fp8",
    "fmt": "e4m3",
    "activation_scheme": "dynamic",
    "weight_block_size": [128, 128],
}
"""What a preset's ``checkpoint_dtype: fp8`` stands for: the block-fp8 ``quantization_config`` of the DeepSeek and
GLM FP8 checkpoints (tests/data/hf/glm-5, glm-5.3, deepseek-v3, deepseek-v3.2 config.json)."""


def preset_weights(arch: ModelArch, source: str, config: Mapping[str, Any], checkpoint_dtype: object) -> ModelArch:
    """``arch`` (a preset) with the weights its config.json would give; ``checkpoint_dtype: fp8`` without a
    ``quantization_config`` is the block-fp8 one that config.json carries."""
    data = dict(config)
    if "quantization_config" not in data and checkpoint_dtype not in (None, "bf16", "fp16"):
        if checkpoint_dtype != "fp8":  # an nvfp4 / fp32 preset names no layout to match: its groups stand
            return as_parameter_groups(arch)
        data["quantization_config"] = dict(PRESET_FP8_BLOCKS)
    return _weighed(arch, source, json.dumps(data, sort_keys=True))


@lru_cache(maxsize=32)
def _weighed(arch: ModelArch, source: str, config: str) -> ModelArch:
    """The per-tensor layout of a preset's config, once a process (GLM-5.3: 119,030 tensors, about 1 s of CPU)."""
    from kvplan.models.checkpoint import with_checkpoint

    return with_checkpoint(arch, source, json.loads(config), snapshot=False)

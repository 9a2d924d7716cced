"""kvplan.engines.vllm_families pinned: which family record each architecture name reaches (mutation check).

A family is named by its exact architectures (Qwen3-Next's, Kimi-Linear's) or by a prefix (``GlmMoeDsa``,
``DeepseekV4``); any other architecture takes vLLM's defaults. What each record changes is vLLM's own:
``GlmMoeDsaForCausalLM.verify_and_update_config`` sets an fp8_e4m3 KV cache on SM10x; ``config/speculative.py``
maps qwen3_next to its MTP model and kimi_linear to none.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.vllm_families import family_of
from kvplan.models.from_hf import load_model


@pytest.mark.parametrize(
    ("model", "family", "mtp", "sm10x_dtype"),
    [
        ("qwen3-next-80b-a3b", "Qwen3-Next", "planned", "auto"),
        ("qwen3.6-27b", "Qwen3-Next", "planned", "auto"),  # Qwen3_5ForConditionalGeneration: built as Qwen3-Next
        ("kimi-linear-48b-a3b", "Kimi-Linear", "no_draft", "auto"),
        ("glm-5.3", "GlmMoeDsa", "not_planned", "fp8_e4m3"),
        ("deepseek-v4-flash", "DeepSeek-V4", "not_planned", "auto"),
        ("llama-3.1-8b", "other", "not_planned", "auto"),
        ("deepseek-v3.2", "other", "not_planned", "auto"),  # DeepseekV32: not the V4 prefix
    ],
)
def test_family_of(model: str, family: str, mtp: str, sm10x_dtype: str) -> None:
    f = family_of(load_model(model))
    assert (f.name, f.hybrid_mtp, f.sm10x_kv_dtype) == (family, mtp, sm10x_dtype)


def test_a_prefix_matches_names_that_start_with_it_only() -> None:
    glm = load_model("glm-5.3")
    assert family_of(replace(glm, architecture="GlmMoeDsaForCausalLMv2")).name == "GlmMoeDsa"
    assert family_of(replace(glm, architecture="XGlmMoeDsaForCausalLM")).name == "other"

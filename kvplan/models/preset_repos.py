"""The names users type for a model and the Hugging Face repository an engine loads for each preset.

``PRESET_ALIASES``: a model published under several names that share one config.json is one preset; the other
names resolve to it (README: "R1 shares deepseek-v3's config"). ``PRESET_REPOS``: what ``--model-path`` /
``vllm serve`` loads for a preset (the checkpoint the preset describes: its ``checkpoint_dtype`` and
``description``), so that an emitted launch command names a repository the engine fetches.
"""

from __future__ import annotations

PRESET_ALIASES: dict[str, str] = {
    # deepseek-ai/DeepSeek-R1 and -R1-0528: DeepseekV3ForCausalLM, the same config.json fields as DeepSeek-V3
    # (61 layers, kv_lora_rank 512, qk_rope_head_dim 64, one MTP layer, fp8 128x128 blocks)
    "deepseek-r1": "deepseek-v3",
    "deepseek-r1-0528": "deepseek-v3",
}

PRESET_REPOS: dict[str, str] = {
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "deepseek-r1": "deepseek-ai/DeepSeek-R1",
    "deepseek-r1-0528": "deepseek-ai/DeepSeek-R1-0528",
    "deepseek-v3.2": "deepseek-ai/DeepSeek-V3.2",
    "deepseek-v4-flash": "deepseek-ai/DeepSeek-V4-Flash",
    "deepseek-v4-pro": "deepseek-ai/DeepSeek-V4-Pro",
    "glm-4.5-air": "zai-org/GLM-4.5-Air",
    "glm-5": "zai-org/GLM-5-FP8",
    "glm-5.3": "zai-org/GLM-5.3-FP8",
    "glm-5.3-flash": "zai-org/GLM-5.3-Flash",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "kimi-k3": "moonshotai/Kimi-K3",
    "kimi-linear-48b-a3b": "moonshotai/Kimi-Linear-48B-A3B-Instruct",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-next-80b-a3b": "Qwen/Qwen3-Next-80B-A3B-Instruct",
}


def canonical_preset(name: str) -> str:
    """A preset name with its aliases resolved (``DeepSeek-R1`` -> ``deepseek-v3``)."""
    key = name.strip().lower()
    return PRESET_ALIASES.get(key, key)


def repo_for(name: str) -> str | None:
    """The repository of a preset name or alias as typed (an alias keeps its own repository), else None."""
    key = name.strip().lower()
    return PRESET_REPOS.get(key)


def preset_for_repo(repo: str) -> str | None:
    """The preset (or alias) whose repository this is, for reading a launch command back."""
    return next((name for name, r in PRESET_REPOS.items() if r.lower() == repo.strip().lower()), None)


def aliases_of(preset: str) -> tuple[str, ...]:
    """The other names that resolve to this preset."""
    return tuple(a for a, p in PRESET_ALIASES.items() if p == preset)

"""Fuzzing the Kimi-Linear / Kimi-K3 parameter layout (kvplan/models/params_kimi_linear.py): any mutation of the
presets' configs (top-level fields and linear_attn_config's) either counts (groups add up to the total, bytes on a
rank never above the whole, more ranks never more bytes) or fails as a located ConfigError; never another
exception."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kvplan.models.presets import resolve_preset as _resolve
from tests.fuzz.params_check import counts_or_fails_located

CONFIGS = [dict(_resolve("models", name).data["config"]) for name in ("kimi-linear-48b-a3b", "kimi-k3")]
KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "q_lora_rank", "kv_lora_rank",
        "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mla_use_output_gate", "num_experts",
        "num_shared_experts", "moe_intermediate_size", "intermediate_size", "first_k_dense_replace",
        "moe_layer_freq", "routed_expert_hidden_size", "latent_moe_use_norm", "attn_res_block_size", "vocab_size",
        "tie_word_embeddings", "linear_attn_config")  # fmt: skip
LA_KEYS = ("kda_layers", "num_heads", "head_dim", "short_conv_kernel_size", "use_full_rank_gate")
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 100),
    st.sampled_from([0.5, 128, 512, 2**40]),
    st.text(max_size=4),
    st.lists(st.integers(-1, 100), max_size=30),
)


@given(
    st.sampled_from(CONFIGS),
    st.dictionaries(st.sampled_from(KEYS), values, max_size=3),
    st.dictionaries(st.sampled_from(LA_KEYS), values, max_size=2),
)
def test_mutated_config_counts_or_fails_located(base: dict[str, Any], edit: dict[str, Any], la: dict[str, Any]) -> None:
    cfg = {**base, **edit}
    if la and isinstance(cfg.get("linear_attn_config"), dict):
        cfg["linear_attn_config"] = {**cfg["linear_attn_config"], **la}
    counts_or_fails_located(cfg)

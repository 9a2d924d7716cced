"""Fuzzing the Qwen3-Next parameter layout (kvplan/models/params_qwen3_next.py): any mutation of the preset's config
either counts (groups add up to the total, bytes on a rank never above the whole, more ranks never more bytes) or
fails as a located ConfigError; never another exception."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kvplan.models.presets import resolve_preset as _resolve
from tests.fuzz.params_check import counts_or_fails_located

CONFIG = dict(_resolve("models", "qwen3-next-80b-a3b").data["config"])
KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
        "linear_conv_kernel_dim", "num_experts", "moe_intermediate_size", "shared_expert_intermediate_size",
        "intermediate_size", "decoder_sparse_step", "mlp_only_layers", "full_attention_interval", "layer_types",
        "num_nextn_predict_layers", "attn_output_gate", "partial_rotary_factor", "rope_parameters",
        "max_position_embeddings", "vocab_size", "tie_word_embeddings")  # fmt: skip
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.sampled_from([0.25, 1.5, 128, 512, 2**40]),
    st.text(max_size=4),
    st.lists(st.integers(-1, 50), max_size=50),
    st.lists(st.sampled_from(["linear_attention", "full_attention", "x"]), min_size=1, max_size=50),
    st.fixed_dictionaries({"partial_rotary_factor": st.sampled_from([0.5, 0, "a", None])}),
)


@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=4))
def test_mutated_config_counts_or_fails_located(edit: dict[str, Any]) -> None:
    cfg = {**CONFIG, **edit}
    counts_or_fails_located(cfg)

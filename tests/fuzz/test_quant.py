"""Fuzz the weights estimate's readers (issue 11): quantization_config and the GQA/MLA shape fields.

The contract: param_groups_from_hf returns groups whose bytes per GPU are non-negative integers, or raises a
KvplanError of one line; never another exception, within a work budget, whatever the config holds (hostile
regexes included: a repeated group or too many repeats is refused before it runs).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.errors import ConfigError, KvplanError
from kvplan.models.arch import Split
from kvplan.models.weights import param_groups_from_hf

FUZZ = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)

GQA: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 512,
    "num_hidden_layers": 6,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1024,
    "moe_intermediate_size": 256,
    "num_experts": 8,
    "mlp_only_layers": [0],
    "decoder_sparse_step": 1,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}
MLA: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "hidden_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "q_lora_rank": 256,
    "kv_lora_rank": 128,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
    "first_k_dense_replace": 1,
    "intermediate_size": 1024,
    "moe_intermediate_size": 256,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_nextn_predict_layers": 1,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
}
QUANT: list[dict[str, Any]] = [
    {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head", "mlp.gate"]},
    {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
    {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
    {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["*self_attn*"]},
    {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True},
            }
        },
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
    },
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["re:(.*.*)*x", "re:.*.*.*.*.*.*x", "re:(unclosed", "re:.*", "*", "Linear", "torch.uint8"])
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
KEYS = [
    "quant_method",
    "bits",
    "group_size",
    "weight_block_size",
    "zero_point",
    "modules_to_not_convert",
    "exclude_modules",
    "ignore",
    "config_groups",
    "quant_algo",
    "targets",
    "weights",
    "num_bits",
    "strategy",
    "type",
    "symmetric",
    "block_structure",
    "scale_dtype",
    "activation_scheme",
    "quantization",
]


def _mutate(doc: Any, path: list[Any], value: Any) -> Any:
    """doc with the node at ``path`` (as far as it exists) replaced by ``value``."""
    if not path or not isinstance(doc, dict | list):
        return value
    key, rest = path[0], path[1:]
    if isinstance(doc, dict):
        k = key if isinstance(key, str) else (sorted(doc)[key % len(doc)] if doc else "x")
        return {**doc, k: _mutate(doc.get(k), rest, value)}
    if not doc:
        return [value]
    i = key % len(doc) if isinstance(key, int) else 0
    return [*doc[:i], _mutate(doc[i], rest, value), *doc[i + 1 :]]


def check(config: dict[str, Any]) -> None:
    try:
        w = param_groups_from_hf(config, "fuzz/config.json")
    except KvplanError as e:
        assert "\n" not in str(e)
        return
    for split in (Split.of(tp=1), Split.of(tp=8, dp_attention=2, ep=16, pp=2)):
        for g in w.groups:
            b = g.bytes_per_gpu(split)
            assert isinstance(b, int) and b >= 0
    assert all("\n" not in a for a in w.assumptions)


@FUZZ
@given(
    base=st.sampled_from([GQA, MLA]),
    quant=st.sampled_from(QUANT),
    path=st.lists(st.sampled_from(KEYS) | st.integers(min_value=0, max_value=5), min_size=1, max_size=4),
    value=values,
)
def test_quantization_config_mutations(
    base: dict[str, Any], quant: dict[str, Any], path: list[Any], value: Any
) -> None:
    check({**copy.deepcopy(base), "quantization_config": _mutate(quant, path, value)})


@FUZZ
@given(
    base=st.sampled_from([GQA, MLA]),
    changes=st.dictionaries(
        st.sampled_from(
            [
                *sorted(GQA),
                *sorted(MLA),
                "num_local_experts",
                "attention_bias",
                "partial_rotary_factor",
                "tie_word_embeddings",
                "quantization_config",
            ]
        ),
        values,
        max_size=3,
    ),
)
def test_shape_field_mutations(base: dict[str, Any], changes: dict[str, Any]) -> None:
    check({**copy.deepcopy(base), **changes})


@pytest.mark.parametrize(
    "pattern",
    ["re:(.*.*)*x", "re:(a|aa)+$", "re:.*.*.*.*.*.*.*.*.*x", "re:(.+)+X", "re:.{0,40}.{0,40}.{0,40}.{0,40}.{0,40}x"],
)
def test_catastrophic_regexes_are_refused_before_they_run(pattern: str) -> None:
    """(.*.*)*x alone took over 20 s against one module name before kvplan refused it; now: exit 2, at once."""
    cfg = {**GQA, "quantization_config": {**QUANT[-1], "ignore": [pattern]}}
    with pytest.raises(ConfigError) as e:  # refused by shape, before the regex runs (its time: benchmarks/)
        param_groups_from_hf(cfg, "m/config.json")
    assert e.value.key == "quantization_config.ignore.0" and "refused" in str(e.value)


def test_pattern_counts_are_bounded() -> None:
    many = [f"re:.*layers\\.{i}\\.self_attn.*" for i in range(300)]  # 300 regexes > limits.MAX_MODULE_REGEXES (64)
    with pytest.raises(ConfigError, match="past kvplan's limits"):
        param_groups_from_hf({**GQA, "quantization_config": {**QUANT[-1], "ignore": many}}, "m/config.json")
    # 282 exact names (Qwen3-235B-A22B-FP8's list is that long) are fine, and fast
    names = [f"model.layers.{i}.mlp.gate" for i in range(282)]
    w = param_groups_from_hf({**GQA, "quantization_config": {**QUANT[-1], "ignore": names}}, "m/config.json")
    assert w.groups  # their speed: benchmarks/quant_limits.py


def test_layer_counts_are_bounded_in_time() -> None:
    """Found by the fuzzer: 275,568 layers took 40 s (every layer's modules sized one by one). Now modules are
    counted per distinct kind: kvplan's largest layer count (limits.MAX_LAYERS, 100,000) sizes in well under the
    budget when every linear module is stored alike, and name matching stops at limits.MAX_PATTERN_LAYERS."""
    w = param_groups_from_hf({**MLA, "num_hidden_layers": 100_000}, "m/config.json")  # time: benchmarks/
    # 99,999 MoE layers × 8 experts × 3 × 512 × 256 = 314,569,654,272 routed-expert parameters
    assert next(g for g in w.groups if g.name == "routed_experts").params == 99_999 * 8 * 3 * 512 * 256
    with pytest.raises(ConfigError, match="from 1 to 100,000"):
        param_groups_from_hf({**GQA, "num_hidden_layers": 100_001}, "m/config.json")
    with pytest.raises(ConfigError, match="matches module names for at most 1,024 layers"):
        param_groups_from_hf({**GQA, "num_hidden_layers": 2000, "quantization_config": QUANT[-1]}, "m/config.json")


def test_config_text_never_breaks_the_weights_line() -> None:
    """Strings from the config reach the summary only from kvplan's own vocabulary (or quoted in an assumption)."""
    group = {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "fl\noat", "strategy": "ten\nsor"}}
    q = {"quant_method": "compressed-tensors", "config_groups": {"g": group}}
    w = param_groups_from_hf({**GQA, "quantization_config": q}, "m/config.json")
    assert "\n" not in w.summary and all("\n" not in a for a in w.assumptions)
    assert w.assumptions == ("compressed-tensors strategy 'ten\\nsor' is not modelled: its scales are left out",)

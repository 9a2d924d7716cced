"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/weights.py.

Each expected parameter count is derived in a comment from the modules vLLM builds for the config
(vllm/model_executor/models/deepseek_v2.py ``DeepseekV2MLAAttention``, ``DeepseekV2MoE``; qwen3_moe.py), never
from kvplan's own output.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.weights import HYBRID_GROUP_MODULES, hybrid_groups, param_groups_from_hf

# a small MLA MoE config (DeepSeek-V2 shape) that leaves v_head_dim and n_shared_experts out
TINY_MLA: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "kv_lora_rank": 64,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "first_k_dense_replace": 1,
    "intermediate_size": 512,
    "n_routed_experts": 4,
    "moe_intermediate_size": 128,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
}


def _params(cfg: dict[str, Any]) -> dict[str, int]:
    return {g.name: g.params for g in param_groups_from_hf(cfg, "tiny").groups}


def test_mla_without_v_head_dim_takes_128_and_without_shared_experts_builds_none() -> None:
    # transformers DeepseekV2Config / DeepseekV3Config default v_head_dim=128. Per layer (DeepseekV2MLAAttention,
    # q_lora_rank absent so a plain q_proj):
    #   q_proj heads × (nope + rope) = 4 × 48 = 192 out × 256 in = 49,152
    #   kv_a_proj_with_mqa (kv_lora_rank + rope) = 80 × 256 = 20,480
    #   kv_b_proj heads × (nope + v) = 4 × 160 = 640 × 64 = 40,960
    #   o_proj 256 × heads × v = 256 × 512 = 131,072      → 241,664 a layer, × 2 layers = 483,328
    # DeepseekV2MoE: `if config.n_shared_experts is None: self.shared_experts = None` — no shared group.
    # Routed experts on layer 1 only (first_k_dense_replace 1): 4 × 3 × 256 × 128 = 393,216; dense MLP on layer 0:
    # 3 × 256 × 512 = 393,216; router 4 × 256 = 1,024; untied embeddings 2 × 1000 × 256 = 512,000.
    assert _params(TINY_MLA) == {
        "attention": 483_328,
        "dense_mlp": 393_216,
        "routed_experts": 393_216,
        "router": 1_024,
        "embeddings": 512_000,
    }


def test_mla_layer_spans_split_dense_and_moe_layers() -> None:
    # first_k_dense_replace 1 of 2 layers: the dense MLP sits on layer 0, the experts and router on layer 1
    spans = {g.name: g.layer_span for g in param_groups_from_hf(TINY_MLA, "tiny").groups}
    assert spans["attention"] == (0, 2)
    assert spans["dense_mlp"] == (0, 1)
    assert spans["routed_experts"] == spans["router"] == (1, 2)


@pytest.mark.parametrize("layers", [["0"], [True], "0"])
def test_mlp_only_layers_must_be_layer_numbers(layers: object) -> None:
    # Qwen3MoeDecoderLayer tests `layer_idx not in config.mlp_only_layers`: a string or bool never equals a layer
    # index, so such a list would silently make every layer MoE; kvplan refuses it with the key.
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 3072,
        "moe_intermediate_size": 512,
        "num_experts": 8,
        "mlp_only_layers": layers,
        "vocab_size": 1000,
    }
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(cfg, "tiny/config.json")
    assert e.value.key == "mlp_only_layers"
    assert "expected a list of layer numbers" in str(e.value)


@pytest.mark.parametrize("factor", [1.5, 0, True])
def test_partial_rotary_factor_outside_0_1_is_refused_with_its_value(factor: object) -> None:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "partial_rotary_factor": factor,
    }
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(cfg, "tiny/config.json")
    assert e.value.key == "partial_rotary_factor"
    assert f"expected a number in (0, 1], got {factor!r}" in str(e.value)


def test_a_family_module_not_written_yet_leaves_no_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    # HYBRID_GROUP_MODULES may name a family module before it exists: the architecture then has no groups (the
    # loader asks for weights_per_gpu); an import error inside an existing module still raises
    monkeypatch.setitem(HYBRID_GROUP_MODULES, "NotYetForCausalLM", "kvplan.models.params_not_yet_written")
    assert hybrid_groups("NotYetForCausalLM") is None
    monkeypatch.setitem(HYBRID_GROUP_MODULES, "BrokenForCausalLM", "kvplan.models.params_not_yet_written.inner")
    with pytest.raises(ModuleNotFoundError):
        hybrid_groups("BrokenForCausalLM")


def test_an_indexer_only_with_index_topk() -> None:
    # vLLM deepseek_v2.py DeepseekV2MLAAttention: `self.is_v32 = hasattr(config, "index_topk")`, the indexer built
    # only then: index_n_heads alone adds nothing (attention stays 483,328, as above)
    assert _params({**TINY_MLA, "index_n_heads": 8})["attention"] == 483_328
    # with index_topk, index_head_dim 128 (DeepSeek-V3.2's) unless given: per layer wq_b 8 × 128 = 1,024 × 256
    # (no q_lora: the hidden size) = 262,144, wk 128 × 256 = 32,768, weights_proj 8 × 256 = 2,048 → 296,960 × 2
    # layers = 593,920 more
    assert _params({**TINY_MLA, "index_n_heads": 8, "index_topk": 64})["attention"] == 483_328 + 593_920


def test_first_k_dense_replace_0_makes_every_layer_moe() -> None:
    # vLLM deepseek_v2.py DeepseekV2DecoderLayer: MoE iff n_routed_experts and layer_idx >= first_k_dense_replace
    # (and layer_idx % moe_layer_freq == 0); 0 is transformers DeepseekV2Config's default. Both layers MoE:
    # routed 2 × 4 × 3 × 256 × 128 = 786,432, routers 2 × 4 × 256 = 2,048, no dense MLP
    g = _params({**TINY_MLA, "first_k_dense_replace": 0})
    assert (g["routed_experts"], g["router"], "dense_mlp" in g) == (786_432, 2_048, False)

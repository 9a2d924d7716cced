"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/weights.py.

Each expected parameter count is derived in a comment from the modules vLLM builds for the config
(vllm/model_executor/models/deepseek_v2.py ``DeepseekV2MLAAttention``, ``DeepseekV2MoE``; qwen3_moe.py), never
from kvplan's own output.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.models.quant import resolve
from kvplan.models.weights import (
    GROUPS_SAID,
    HYBRID_GROUP_MODULES,
    BufferGroup,
    MoeShape,
    _Groups,
    as_parameter_groups,
    hybrid_groups,
    param_groups,
    param_groups_from_hf,
)

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


# --- fresh seed 65034 (issue 26): survivors of the second sample


def _shape(**kw: Any) -> MoeShape:
    # TINY_MLA's shape with one MTP layer and a 2-expert MoE on layer 1
    base: dict[str, Any] = dict(
        hidden_size=256, num_layers=2, num_mtp_layers=0, num_attention_heads=4, q_lora_rank=None, kv_lora_rank=64,
        qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=128, index_n_heads=0, index_head_dim=0,
        first_k_dense_replace=1, intermediate_size=512, n_routed_experts=4, n_shared_experts=0,
        moe_intermediate_size=128, vocab_size=1000, tie_word_embeddings=False,
    )  # fmt: skip
    return MoeShape(**{**base, **kw})


@pytest.mark.parametrize(
    ("dtype", "per_param"),
    [
        # fp8 e4m3 1 B + one fp32 scale (4 B) per 128 × 128 block (DeepSeek-V3's weight_block_size [128, 128])
        ("fp8", (16_388, 16_384)),
        # NVFP4: 4 bits + one fp8 e4m3 scale per 16 values = 0.5 + 1/16 = 9/16 B (ModelOpt NVFP4, group_size 16)
        ("nvfp4", (9, 16)),
        ("bf16", (2, 1)),
        ("fp16", (2, 1)),
        ("fp32", (4, 1)),
    ],
)
def test_a_presets_checkpoint_dtype_sets_its_linear_bytes(dtype: str, per_param: tuple[int, int]) -> None:
    g = {x.name: x for x in param_groups(_shape(), checkpoint_dtype=dtype)}
    a = g["attention"]
    assert (a.bytes_per_param_num, a.bytes_per_param_den) == per_param
    # the router stays in bf16 whatever the linears are (DeepSeek-V3's gate.weight is bf16 in the fp8 checkpoint)
    assert (g["router"].bytes_per_param_num, g["router"].bytes_per_param_den) == (2, 1)


def test_a_presets_tied_embeddings_are_one_copy() -> None:
    # tie_word_embeddings: lm_head shares embed_tokens' weight (vLLM `self.lm_head = self.model.embed_tokens`):
    # vocab × h = 1,000 × 256 = 256,000 parameters once; untied, embed_tokens and lm_head 512,000
    tied = {g.name: g.params for g in param_groups(_shape(tie_word_embeddings=True), checkpoint_dtype="bf16")}
    untied = {g.name: g.params for g in param_groups(_shape(), checkpoint_dtype="bf16")}
    assert (tied["embeddings"], untied["embeddings"]) == (256_000, 512_000)


def test_a_rotary_cache_is_rebuilt_in_the_model_dtype() -> None:
    # Llama-3.1-8B's cos/sin cache: 131,072 positions × 128 × 2 B = 33,554,432 B (32 MiB) in bf16; vLLM's get_rope
    # builds it in the model dtype, so --dtype float32 doubles it to 67,108,864 B and back to bf16 halves it
    cache = BufferGroup(name="rotary_cache", params=0, bytes_per_param_num=0, buffer_bytes=33_554_432, split="none")
    assert cache.in_dtype(2, 4).buffer_bytes == 67_108_864
    assert cache.in_dtype(4, 2).buffer_bytes == 16_777_216
    assert cache.in_dtype(2, 4).bytes_per_gpu(Split.of(tp=8)) == 67_108_864  # on every GPU, unsplit


@pytest.mark.parametrize(
    "key", ["first_k_dense_replace", "intermediate_size", "n_routed_experts", "moe_intermediate_size", "vocab_size"]
)
def test_an_mla_config_without_an_expert_count_width_or_vocab_is_refused(key: str) -> None:
    # DeepseekV2Config and DeepseekV3Config default these differently (first_k_dense_replace 0 / 3,
    # intermediate_size 11,008 / 18,432, n_routed_experts None / 256, moe_intermediate_size 1,407 / 2,048,
    # vocab_size 102,400 / 129,280), as from_hf says: kvplan read 0 before (no dense layers, no experts, no
    # embeddings); it now names the key, as from_hf does
    cfg = {k: v for k, v in TINY_MLA.items() if k != key}
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(cfg, "tiny/config.json")
    assert (e.value.key, e.value.detail) == (key, "missing (required)")
    # 0 experts is no MoE at all, refused as from_hf refuses it (vLLM's DeepseekV2MoE: tp_size > n_routed_experts)
    if key == "n_routed_experts":
        with pytest.raises(ConfigError, match="expected an integer from 1"):
            param_groups_from_hf({**TINY_MLA, key: 0}, "tiny/config.json")


GLM_MOE: dict[str, Any] = {
    # a small GLM-4.5-shaped config (Glm4MoeForCausalLM: GQA attention, DeepSeek-style experts)
    "architectures": ["Glm4MoeForCausalLM"],
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "vocab_size": 1000,
}


@pytest.mark.parametrize("key", ["n_shared_experts", "first_k_dense_replace"])
def test_a_glm_moe_config_names_its_shared_experts_and_dense_layers(key: str) -> None:
    # transformers Glm4MoeConfig defaults n_shared_experts 1 and first_k_dense_replace 1, DeepseekV2Config None and
    # 0: kvplan read 0 for both (a GLM-4.5 without its shared expert); GLM-4.5's published config.json names both
    cfg = {k: v for k, v in GLM_MOE.items() if k != key}
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(cfg, "tiny/config.json")
    assert (e.value.key, e.value.detail) == (key, "missing (required)")


def test_a_glm_moe_config_with_0_shared_experts_and_0_dense_layers() -> None:
    # 0 is a count a config may write: no shared expert (Glm4MoE builds shared_experts only when n_shared_experts
    # > 0) and every layer MoE (layer_idx >= first_k_dense_replace): routed 2 layers × 4 × 3 × 256 × 128 = 786,432
    g = _params({**GLM_MOE, "n_shared_experts": 0, "first_k_dense_replace": 0})
    assert (g["routed_experts"], "shared_experts" in g, "dense_mlp" in g) == (786_432, False, False)
    # with the published counts: shared 1 × 3 × 256 × 128 = 98,304 on layer 1, dense 3 × 256 × 512 = 393,216 on 0
    g = _params(GLM_MOE)
    assert (g["routed_experts"], g["shared_experts"], g["dense_mlp"]) == (393_216, 98_304, 393_216)


@pytest.mark.parametrize("key", ["n_routed_experts", "num_local_experts", "num_experts"])
def test_an_expert_count_of_0_in_a_gqa_config_is_a_dense_model(key: str) -> None:
    # `experts = mixtral or qwen or glm`: an expert count of 0 is no MoE, the MLP is intermediate_size on every
    # layer (3 × 256 × 512 × 2 = 786,432), and a width-less MoE is not refused
    cfg = {k: v for k, v in GLM_MOE.items() if k != "n_routed_experts"}
    g = _params({**cfg, key: 0})
    assert (g["dense_mlp"], "routed_experts" in g) == (786_432, False)


def test_a_bad_partial_rotary_factor_is_said_in_at_most_120_characters() -> None:
    # one line a terminal shows whole: the value's repr is cut so the detail is 120 characters at most
    cfg = {**GLM_MOE, "partial_rotary_factor": "x" * 500}
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(cfg, "tiny/config.json")
    assert len(e.value.detail) == 120 and e.value.detail.startswith("expected a number in (0, 1], got 'xxx")


def test_a_mixtral_has_no_shared_expert_and_no_dense_layer() -> None:
    # mixtral.py MixtralDecoderLayer: every layer is block_sparse_moe, no shared expert and no dense first layers
    # (n_shared_experts and first_k_dense_replace are read only beside n_routed_experts): routed 2 layers × 4 experts
    # × 3 × 256 × 512 (intermediate_size is the expert width) = 3,145,728, routers 2 × 4 × 256 = 2,048
    cfg = {k: v for k, v in GLM_MOE.items() if k not in ("n_routed_experts", "moe_intermediate_size")}
    g = _params({**cfg, "architectures": ["MixtralForCausalLM"], "num_local_experts": 4})
    assert (g["routed_experts"], g["router"], "shared_experts" in g, "dense_mlp" in g) == (
        3_145_728,
        2_048,
        False,
        False,
    )


def test_mla_without_qk_nope_head_dim_takes_128() -> None:
    # transformers DeepseekV2Config / DeepseekV3Config default qk_nope_head_dim=128 (TINY_MLA's is 32): q_proj
    # 4 heads × (128 + rope 16) = 576 × 256 = 147,456; kv_a 80 × 256 = 20,480; kv_b 4 × (128 + v 128) = 1,024 × 64
    # = 65,536; o_proj 131,072 → 364,544 a layer × 2 = 729,088
    cfg = {k: v for k, v in TINY_MLA.items() if k != "qk_nope_head_dim"}
    assert _params(cfg)["attention"] == 729_088


def test_a_tied_mla_model_has_one_embedding_copy() -> None:
    # tie_word_embeddings: vLLM DeepseekV2ForCausalLM's lm_head is embed_tokens: 1,000 × 256 = 256,000 once
    assert _params({**TINY_MLA, "tie_word_embeddings": True})["embeddings"] == 256_000


FP8_BLOCKS = {"quant_method": "fp8", "weight_block_size": [128, 128]}


def test_each_mtp_layer_is_quantized_by_its_own_layer_number() -> None:
    # a checkpoint's MTP layers follow its decoder layers (DeepSeek-V3's at model.layers.61): with 2 layers and 2
    # MTP layers they are model.layers.2 and model.layers.3, and an ignore list naming layer 3 leaves only that one
    # in bf16. An MTP layer (no router): attention 241,664 + 4 experts × 3 × 256 × 128 = 393,216 + eh_proj 256 × 512
    # = 131,072 → 765,952 parameters; layer 2 in fp8 blocks 765,952 × 16,388 / 16,384 = 766,139 B, layer 3 in bf16
    # 1,531,904 B → 2,298,043 B
    q = {**FP8_BLOCKS, "modules_to_not_convert": ["model.layers.3."]}
    cfg = {**TINY_MLA, "num_nextn_predict_layers": 2, "quantization_config": q}
    mtp = next(g for g in param_groups_from_hf(cfg, "tiny").groups if g.name == "mtp")
    assert mtp.params == 2 * 765_952 and mtp.bytes_per_gpu(Split.of(tp=1)) == 2_298_043


def test_each_glm_mtp_layer_is_quantized_by_its_own_layer_number() -> None:
    # GLM-4.5's MTP layers follow its decoder layers too (glm4_moe_mtp.py: model.layers.{num_hidden_layers + k}):
    # an MTP layer of GLM_MOE: q, o 256 × 256 each + k, v 128 × 256 each = 196,608; experts 4 × 3 × 256 × 128 =
    # 393,216 and one shared 98,304; eh_proj 131,072 → 819,200 parameters; layer 2 in fp8 blocks 819,200 × 16,388 /
    # 16,384 = 819,400 B, layer 3 in bf16 1,638,400 B → 2,457,800 B
    q = {**FP8_BLOCKS, "modules_to_not_convert": ["model.layers.3."]}
    cfg = {**GLM_MOE, "num_nextn_predict_layers": 2, "quantization_config": q}
    mtp = next(g for g in param_groups_from_hf(cfg, "tiny").groups if g.name == "mtp")
    assert mtp.params == 2 * 819_200 and mtp.bytes_per_gpu(Split.of(tp=1)) == 2_457_800


def test_a_partial_rotary_factor_sizes_the_rotary_cache() -> None:
    # vLLM get_rope: rotary_dim = int(head_dim × partial_rotary_factor), cos_sin_cache max_position × rotary_dim
    # in the model dtype: GLM-4.5's factor 0.5 on head_dim 64 → 32; 4,096 positions × 32 × 2 B = 262,144 B
    cfg = {**GLM_MOE, "partial_rotary_factor": 0.5, "max_position_embeddings": 4096}
    cache = next(g for g in param_groups_from_hf(cfg, "tiny").groups if g.name == "rotary_cache")
    assert cache.bytes_per_gpu(Split.of(tp=8)) == 262_144
    # a factor of exactly 1 is the whole head: 4,096 × 64 × 2 B
    cfg["partial_rotary_factor"] = 1
    cache = next(g for g in param_groups_from_hf(cfg, "tiny").groups if g.name == "rotary_cache")
    assert cache.bytes_per_gpu(Split.of(tp=8)) == 524_288


# --- third fresh seed 59737


def test_a_moe_config_without_its_expert_width_is_refused() -> None:
    # Qwen3MoeConfig's experts are moe_intermediate_size wide (Qwen3MoeSparseMoeBlock); a config naming experts
    # without it has no expert width to count: refused with the key, not counted 0 or 1 wide
    cfg = {k: v for k, v in GLM_MOE.items() if k not in ("n_routed_experts", "moe_intermediate_size")}
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf({**cfg, "architectures": ["Qwen3MoeForCausalLM"], "num_experts": 4}, "tiny/config.json")
    assert (e.value.key, e.value.detail) == ("moe_intermediate_size", "missing (required for a MoE model)")


def test_a_linear_0_wide_is_no_tensor() -> None:
    # a family module's absent MLP (a down_proj hidden × 0) holds no parameters and makes no group (a group of 0
    # parameters has no bytes per parameter)
    acc = _Groups(resolve({"torch_dtype": "bfloat16"}, "tiny"))
    acc.linear("shared_experts", "tp", "model.layers.0.mlp.shared_expert.down_proj", 256, 0)
    acc.linear("shared_experts", "tp", "model.layers.0.mlp.shared_expert.up_proj", 0, 256)
    assert acc.groups() == ()


def test_the_parameter_group_note_is_said_once_and_only_with_groups() -> None:
    arch = load_model("llama-3.1-8b")
    said = as_parameter_groups(arch)
    assert said.weights_summary.endswith(GROUPS_SAID)
    assert as_parameter_groups(said).weights_summary == said.weights_summary  # not twice
    bare = replace(arch, param_groups=(), weights_summary="")
    assert as_parameter_groups(bare).weights_summary == ""  # no groups: nothing to call an estimate


def test_a_dense_config_writing_an_expert_width_of_0_is_read() -> None:
    # no expert count: moe_intermediate_size is unread by the dense MLP (3 × 256 × 512 × 2 layers = 786,432),
    # so a 0 written there is not refused
    cfg = {k: v for k, v in GLM_MOE.items() if k != "n_routed_experts"}
    assert _params({**cfg, "moe_intermediate_size": 0})["dense_mlp"] == 786_432


def test_a_dsa_config_without_index_n_heads_is_refused_naming_it() -> None:
    # vLLM's Indexer reads config.index_n_heads with no default (deepseek_v2.py Indexer.__init__), and from_hf
    # refuses such a config; the weights reader did too little: it counted no indexer (0 heads)
    cfg = {k: v for k, v in {**TINY_MLA, "index_topk": 64}.items() if k != "index_n_heads"}
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(cfg, "tiny/config.json")
    assert (e.value.key, "missing (required)" in str(e.value)) == ("index_n_heads", True)


def test_a_dsa_preset_without_mtp_or_shared_experts_lists_no_empty_group() -> None:
    # DeepseekV2MoE builds no shared_experts for n_shared_experts 0 / None, and no MTP module exists without
    # num_nextn_predict_layers: their groups hold 0 parameters and are not listed (a weights table has no 0 rows)
    names = [g.name for g in param_groups(_shape(), checkpoint_dtype="fp8")]
    assert names == ["attention", "dense_mlp", "routed_experts", "router", "embeddings"]
    with_both = [g.name for g in param_groups(_shape(num_mtp_layers=1, n_shared_experts=1), checkpoint_dtype="fp8")]
    assert with_both == ["attention", "dense_mlp", "routed_experts", "shared_experts", "router", "embeddings", "mtp"]


@pytest.mark.parametrize(("layers", "mtp", "ok"), [(1_024, 0, True), (1_023, 1, True), (1_024, 1, False)])
def test_per_module_quantization_matches_names_for_1024_layers_mtp_included(layers: int, mtp: int, ok: bool) -> None:
    # limits.MAX_PATTERN_LAYERS = 1,024 layers (+ MTP layers) whose module names kvplan matches against a
    # per-module quantization_config (an ignore list): 1,024 in all is read, 1,025 refused naming the key
    from tests.fuzz.test_quant import GQA, QUANT

    cfg = {**GQA, "num_hidden_layers": layers, "num_nextn_predict_layers": mtp, "quantization_config": QUANT[-1]}
    if ok:
        assert param_groups_from_hf(cfg, "m/config.json").groups
    else:
        with pytest.raises(ConfigError, match="matches module names for at most 1,024 layers") as e:
            param_groups_from_hf(cfg, "m/config.json")
        assert e.value.key == "num_hidden_layers"


def test_qwen3_moe_decoder_sparse_step_3_puts_the_experts_on_layers_2_and_5() -> None:
    # transformers qwen3_moe.py Qwen3MoeDecoderLayer: MoE iff layer_idx not in mlp_only_layers and
    # (layer_idx + 1) % decoder_sparse_step == 0; with step 3 over 6 layers, layers 2 and 5 (3 % 3, 6 % 3): the
    # experts and router span [2, 6), the dense MLP layers 0, 1, 3, 4 span [0, 5) (a step of 2 could not tell
    # layer_idx + 1 from layer_idx - 1)
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256, "num_hidden_layers": 6,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
           "moe_intermediate_size": 128, "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 1000,
           "torch_dtype": "bfloat16", "decoder_sparse_step": 3, "max_position_embeddings": 4096}  # fmt: skip
    spans = {g.name: g.layer_span for g in param_groups_from_hf(cfg, "tiny").groups}
    assert spans["routed_experts"] == spans["router"] == (2, 6)
    assert spans["dense_mlp"] == (0, 5)

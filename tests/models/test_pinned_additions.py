"""The engine's additions to the checkpoint (kvplan/models/additions.py), pinned where the mutation check moves them:
the rope cache of each kind of rope and dtype, the absorbed MLA copies at the attention width, the DSA indexer
schedule's default offset and a bf16 indexer. Each figure is derived in its comment from the engine's source
(tests/models/test_weights_additions.py derives the GLM-5.3 and DeepSeek-V3 terms at tp 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.models.additions import Knobs, additions_group, load_figure, rotary_cache_bytes
from kvplan.models.arch import Split
from tests.models.test_weights_additions import config, terms

HF = Path(__file__).parents[1] / "data" / "hf"


def test_a_float32_rope_is_four_bytes_a_value() -> None:
    # vLLM models/gpt_oss.py OAIAttention: get_rope(..., dtype=torch.float32) (params_gpt_oss passes float32):
    # yarn, original 4,096 × factor 32 = 131,072 positions × head_dim 64 × 4 B
    assert rotary_cache_bytes(dict(config("gpt-oss-120b"), torch_dtype="float32")) == 131_072 * 64 * 4 == 33_554_432
    assert rotary_cache_bytes(dict(config("gpt-oss-120b"), torch_dtype="bfloat16")) == 131_072 * 64 * 2


def test_a_llama3_rope_caches_max_position_embeddings() -> None:
    # Llama-3.1's rope_scaling is llama3 (factor 8, original 8,192): vLLM get_rope -> Llama3RotaryEmbedding with
    # max_position = max_position_embeddings, whose cos_sin_cache is max_position × rotary_dim; only yarn caches
    # original × factor. 131,072 positions × head_dim 4,096 / 32 = 128 × 2 B
    assert rotary_cache_bytes(config("llama-3.1-8b")) == 131_072 * 128 * 2 == 33_554_432


def test_a_partial_rope_caches_its_rotary_dim() -> None:
    # GLM-4.5-Air: partial_rotary_factor 0.5, head_dim 128: rotary_dim 64 (vLLM layers/rotary_embedding get_rope:
    # "if partial_rotary_factor < 1.0: rotary_dim = int(rotary_dim * partial_rotary_factor)"); 131,072 positions × 64
    # × 2 B
    assert rotary_cache_bytes(config("glm-4.5-air")) == 131_072 * 64 * 2 == 16_777_216
    # a factor of 1 or more leaves rotary_dim whole there (the guard is "< 1.0"): Qwen3-8B 40,960 × 128 × 2 B
    assert rotary_cache_bytes(dict(config("qwen3-8b"), partial_rotary_factor=1.5)) == 40_960 * 128 * 2


def test_sglang_absorbs_every_head_at_tp1_and_under_dp_attention() -> None:
    # SGLang DeepseekV2AttentionMLA: num_local_heads = num_heads // attn_tp_size; at tp 1, and at tp 8 with
    # dp_attention 8 (attn_tp_size 1), a rank holds all 128 heads: w_kc + w_vc = 512 × 128 × (128 + 128) × 2 B a
    # layer, 61 layers
    full = 61 * 512 * 128 * 256 * 2
    assert full == 2_046_820_352
    assert terms(config("deepseek-v3"), engine="sglang", split=Split.of(tp=1))["mla_absorbed"] == full
    dp = Split.of(tp=8, dp_attention=8)
    assert terms(config("deepseek-v3"), engine="sglang", split=dp)["mla_absorbed"] == full
    assert terms(config("deepseek-v3"), engine="sglang", split=Split.of(tp=8))["mla_absorbed"] == full // 8


def test_the_indexer_schedules_offset_defaults_to_two() -> None:
    # vLLM deepseek_v2.py / deepseek_v32/attention.py: index_skip_topk_offset = getattr(config, ..., 2); skip_topk =
    # max(layer - offset + 1, 0) % freq != 0 (reference/vllm-0.33.0.md). GLM-5.3 with 7 layers, freq 4, no offset:
    # layers 0, 1 and 5 build an indexer (offset 3 would be 0, 1, 2 and 6)
    cfg = {k: v for k, v in config("glm-5.3").items() if k != "index_skip_topk_offset"}
    cfg["num_hidden_layers"] = 7
    got = terms(cfg, engine="vllm", split=Split.of(tp=8))
    # 3 index groups × (min(8,192, 1,024) + 1) rows × index_topk 2,048 × 4 B
    assert got["physical_topk_indices"] == 3 * 1025 * 2048 * 4 == 25_190_400
    # the 4 other layers' shipped indexers, 9,571,008 B each (test_weights_additions derives it), not built
    assert got["indexer_not_built"] == -4 * 9_571_008
    assert got["indexer_wk_bf16"] == 3 * (1_572_864 - 786_624)


def test_a_bf16_indexer_is_loaded_as_shipped() -> None:
    # DeepSeek-V3.2 without its fp8 quantization_config: wk is already bf16, Indexer.wk_weights_proj holds the same
    # 128 × 7,168 × 2 B (no indexer_wk_bf16 term); kv_b_proj bf16 is viewed, not copied (no mla_absorbed)
    cfg = {k: v for k, v in config("deepseek-v3.2").items() if k != "quantization_config"}
    got = terms(cfg, engine="vllm", split=Split.of(tp=8))
    assert set(got) == {"rotary_cache", "topk_indices_buffer", "physical_topk_indices"}
    # every one of the 61 layers builds an indexer (index_topk_freq 1): 61 × 1,025 × 2,048 × 4 B
    assert got["physical_topk_indices"] == 61 * 1025 * 2048 * 4


def test_the_group_adds_the_additions_only_for_a_named_engine() -> None:
    group = additions_group(config("deepseek-v3"))
    split = Split.of(tp=8)
    assert group.bytes_per_gpu(split) == 0
    assert group.bytes_on(split, engine=None, with_mtp=False) == 0
    # SGLang at tp 8: rotary 163,840 × 64 × 2 B + absorbed 255,852,544 B (test_weights_additions)
    assert group.bytes_on(split, engine="sglang", with_mtp=False) == 163_840 * 64 * 2 + 255_852_544


def _glm7(**changes: Any) -> dict[str, Any]:
    """GLM-5.3's config cut to 7 layers: freq 4, offset 3 build indexers on layers 0, 1, 2 and 6; 3 are not built."""
    cfg = dict(config("glm-5.3"), num_hidden_layers=7)
    cfg.update(changes)
    return cfg


# One layer's indexer in the checkpoint (config_tensors' layout): wq_b index_n_heads 32 × index_head_dim 128 = 4,096
# rows × q_lora_rank 2,048; wk 128 × hidden 6,144; weights_proj 32 × 6,144 and k_norm's weight and bias (2 × 128) in
# the checkpoint dtype.


def test_an_indexer_without_index_head_dim_is_128_wide() -> None:
    # transformers GlmMoeDsaConfig: index_head_dim: int = 128 (the default vLLM's config object carries);
    # fp8 128×128 blocks: wq_b 8,388,608 + 32 × 16 × 4, wk 786,432 + 1 × 48 × 4, weights_proj 393,216, k_norm 512
    cfg = {k: v for k, v in _glm7().items() if k != "index_head_dim"}
    got = terms(cfg, engine="vllm", split=Split.of(tp=8))
    assert got["indexer_not_built"] == -3 * (8_388_608 + 2_048 + 786_432 + 192 + 393_216 + 512) == -28_713_024
    assert got["indexer_wk_bf16"] == 4 * (128 * 6144 * 2 - 786_624)


def test_a_per_tensor_fp8_indexer_has_one_scale_a_tensor() -> None:
    # vLLM quantization/fp8.py without weight_block_size: one fp32 weight_scale a tensor (PerTensorScaleParameter),
    # not one a 128×128 block: wq_b 8,388,608 + 4, wk 786,432 + 4, weights_proj 393,216, k_norm 512
    cfg = _glm7(quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic"})
    got = terms(cfg, engine="vllm", split=Split.of(tp=8))
    assert got["indexer_not_built"] == -3 * (8_388_612 + 786_436 + 393_216 + 512) == -28_706_328


def test_a_float32_checkpoints_indexer_norms_are_four_bytes() -> None:
    # weights_proj 32 × 6,144 × 4 B and k_norm 2 × 128 × 4 B in a float32 checkpoint; wq_b and wk fp8 as above
    got = terms(_glm7(torch_dtype="float32"), engine="vllm", split=Split.of(tp=8))
    assert got["indexer_not_built"] == -3 * (8_390_656 + 786_624 + 786_432 + 1_024) == -29_894_208


def test_the_load_figure_splits_every_expert_unless_ep_is_given() -> None:
    # the engines' default is no expert parallelism (vLLM enable_expert_parallel False, SGLang ep_size 1): at tp 2
    # rank 0 holds every expert, each split 2 ways (FusedMoE moe_tp_size = tp). A 1-layer Mixtral, hidden 64, 4 heads
    # (16 wide), 2 KV heads, 3 experts of 128, vocab 128, per rank: embed + lm_head 2 × 64 × 64, q + o 2 × 32 × 64,
    # k + v 2 × 16 × 64, router 3 × 64 and norms 3 × 64 whole, experts 3 × 3 × 64 × 64 = 51,584 parameters × 2 B
    cfg = dict(config("mixtral-8x7b"), hidden_size=64, num_hidden_layers=1, num_attention_heads=4)
    cfg.update(num_key_value_heads=2, intermediate_size=128, num_local_experts=3, vocab_size=128)
    assert load_figure(cfg, Knobs(engine="vllm", split=Split.of(tp=2))).checkpoint_bytes == 51_584 * 2 == 103_168
    # ep 2: rank 0 holds 2 of the 3 experts whole (vLLM determine_expert_map: the first E % ep ranks take one more),
    # 2 × 3 × 128 × 64 in place of 3 × 3 × 64 × 64
    two = Knobs(engine="vllm", split=Split.of(tp=2, ep=2))
    assert load_figure(cfg, two, ep=2).checkpoint_bytes == (51_584 - 36_864 + 49_152) * 2 == 127_744


# --- fresh seed 52436 (issue 26): survivors of the second sample


def test_a_yarn_factor_of_1_caches_the_original_positions() -> None:
    # vLLM YaRNScalingRotaryEmbedding._compute_cos_sin_cache: torch.arange(max_position_embeddings × scaling_factor)
    # with max_position_embeddings the original's: gpt-oss-120b's yarn at factor 1 caches its original 4,096
    # positions × head_dim 64 × 2 B = 524,288 B, not max_position_embeddings' 131,072
    cfg = config("gpt-oss-120b")
    cfg["rope_scaling"] = {**cfg["rope_scaling"], "factor": 1.0}
    assert rotary_cache_bytes(cfg) == 4_096 * 64 * 2 == 524_288


def test_an_index_topk_pattern_builds_an_indexer_on_its_f_layers() -> None:
    # index_topk_pattern (one letter a layer): "S" skips top-k, so that layer builds no Indexer and its shipped
    # indexer weights are dropped (deepseek_v2.py DeepseekV2MLAAttention.__init__, load_weights). GLM-5.3 cut to 7
    # layers, pattern FSFSSSF: layers 0, 2 and 6 build one (the pattern wins over index_topk_freq 4)
    got = terms(_glm7(index_topk_pattern="FSFSSSF"), engine="vllm", split=Split.of(tp=8))
    # 3 index groups × (min(8,192, 1,024) + 1) rows × index_topk 2,048 × 4 B; the 4 S layers' 9,571,008 B dropped
    assert got["physical_topk_indices"] == 3 * 1025 * 2048 * 4 == 25_190_400
    assert got["indexer_not_built"] == -4 * 9_571_008


def test_the_mtp_layers_own_embed_and_head_are_freed_whole_at_tp_1() -> None:
    # vLLM EagleProposer.load_model shares the target's embed_tokens and lm_head with the MTP drafter, so
    # DeepSeek-V3's MTP layer's own copies are not held. At tp 1 a rank holds each whole: vocab 129,280 (already a
    # multiple of VocabParallelEmbedding's padding 64) × hidden 7,168 × 2 B = 1,853,358,080 B, two of them
    got = terms(config("deepseek-v3"), engine="vllm", split=Split.of(tp=1), with_mtp=True)
    assert got["mtp_shared_embed_head"] == -2 * 129_280 * 7_168 * 2 == -3_706_716_160


def test_an_indexer_narrower_than_a_block_keeps_one_scale_a_started_block() -> None:
    # vLLM fp8.py block quantization: weight_scale_inv is (ceil(out / 128), ceil(in / 128)) fp32, so a 64-row wk
    # still has 1 × 48 scales (192 B), not 64 × 6,144 / 16,384 of one. GLM-5.3 at 7 layers with index_head_dim 64:
    # wq_b 32 × 64 = 2,048 × 2,048 = 4,194,304 + 16 × 16 × 4 = 1,024; wk 64 × 6,144 = 393,216 + 192; weights_proj
    # 32 × 6,144 × 2 = 393,216; k_norm 2 × 64 × 2 = 256 → 4,982,208 B a layer, 3 layers not built
    got = terms(_glm7(index_head_dim=64), engine="vllm", split=Split.of(tp=8))
    assert got["indexer_not_built"] == -3 * (4_195_328 + 393_408 + 393_216 + 256) == -14_946_624


def test_the_additions_rebuilt_in_float32_double_the_rope_only() -> None:
    # --dtype float32: get_rope builds the cos/sin cache in float32 (163,840 × 64 × 4 B); SGLang's absorbed w_kc /
    # w_vc stay bf16 (255,852,544 B at tp 8, as above)
    group = additions_group(config("deepseek-v3")).in_dtype(2, 4)
    assert group.bytes_on(Split.of(tp=8), engine="sglang", with_mtp=False) == 163_840 * 64 * 4 + 255_852_544


def test_the_additions_are_bytes_not_parameters() -> None:
    # the engine's additions are buffers and copies, not checkpoint parameters: the group holds 0 of them, so a
    # model's parameter count (kvplan models) and a pipeline stage's share (pipeline.stage_group_bytes: a group of
    # no parameters is built once a process) are the checkpoint's
    from kvplan.models.from_hf import load_model

    arch = load_model(str(HF / "deepseek-vl2"))
    groups = {g.name: g.params for g in arch.param_groups}
    assert groups["engine_additions"] == 0
    assert arch.total_params == sum(p for name, p in groups.items() if name != "engine_additions")


def test_the_mtp_layers_own_embed_and_head_freed_at_tp_8_are_a_rank_s_share() -> None:
    # at tp 8 VocabParallelEmbedding and ParallelLMHead hold 129,280 / 8 = 16,160 rows a rank each: 2 × 16,160 ×
    # 7,168 × 2 B = 463,339,520 B freed on rank 0
    got = terms(config("deepseek-v3"), engine="vllm", split=Split.of(tp=8), with_mtp=True)
    assert got["mtp_shared_embed_head"] == -2 * 16_160 * 7_168 * 2 == -463_339_520


def test_an_index_topk_freq_of_0_is_read_as_every_layer_and_does_not_raise() -> None:
    # a 0 would be a modulo by zero in max(i - offset + 1, 0) % freq (vLLM raises at load); kvplan reads it as the
    # default 1, as config_tensors reads a decoder_sparse_step of 0: every one of the 7 layers builds an indexer,
    # 7 × 1,025 × 2,048 × 4 B of physical top-k indices and none dropped
    got = terms(_glm7(index_topk_freq=0), engine="vllm", split=Split.of(tp=8))
    assert got == terms(_glm7(index_topk_freq=1), engine="vllm", split=Split.of(tp=8))
    assert got["physical_topk_indices"] == 7 * 1025 * 2048 * 4 and "indexer_not_built" not in got


def test_a_yarn_original_of_one_position_still_caches_original_times_factor() -> None:
    # yarn caches original_max_position_embeddings × factor (YaRNScalingRotaryEmbedding: max_position × scaling);
    # the guard takes every positive original, 1 included: gpt-oss's rope with original 1 and factor 32 caches 32
    # positions × head_dim 64 × 2 B (bf16) = 4,096 B, not max_position_embeddings' 131,072 positions
    c = config("gpt-oss-120b")
    rope = {**c["rope_scaling"], "original_max_position_embeddings": 1}
    assert rotary_cache_bytes(dict(c, rope_scaling=rope, torch_dtype="bfloat16")) == 32 * 64 * 2

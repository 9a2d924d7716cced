"""kvplan.models.from_hf pinned at the boundaries its mutants move (scripts/mutate.py, seed 44480).

Each expected figure comes from the engine's source or the config the model publishes, cited beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model, local_ref
from tests.models.test_hf_config import raw, write_config

HF = Path(__file__).resolve().parent.parent / "data" / "hf"
CONFIGS = Path(__file__).resolve().parents[2] / "kvplan" / "configs" / "models"


def test_a_path_of_two_folders_is_never_a_repo_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # huggingface_hub's validate_repo_id: a repo id is "name" or "namespace/name", one "/" at most; "a/b/c" is a
    # path (missing here), passed on as given so the reader names the file, never looked up in the Hub caches
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    assert local_ref("runs/llama/snapshot") == "runs/llama/snapshot"
    assert local_ref("llama-3.1-8b") == "llama-3.1-8b"  # a preset name: no "/" at all


def test_mla_head_dim_is_nope_plus_rope() -> None:
    # SGLang DeepseekV2AttentionMLA: qk_head_dim = qk_nope_head_dim + qk_rope_head_dim; DeepSeek-V3's config.json
    # 128 + 64 = 192 (the prefill FLOPs per query head), values v_head_dim 128
    arch = load_model(str(HF / "deepseek-v3" / "config.json"))
    assert (arch.head_dim, arch.v_head_dim) == (192, 128)


def _preset(tmp_path: Path, name: str, drop: tuple[str, ...], dtype: str = "nvfp4") -> str:
    """DeepSeek-V3's config as an nvfp4 model YAML: a preset naming no per-tensor layout keeps the parameter groups
    from_hf reads (kvplan.models.preset_weights), the path a config.json laid out per tensor never takes."""
    preset = yaml.safe_load((CONFIGS / "deepseek-v3.yaml").read_text(encoding="utf-8"))
    config = {k: v for k, v in preset["config"].items() if k not in ("quantization_config", *drop)}
    doc = {"schema_version": 1, "name": name, "checkpoint_dtype": dtype, "config": config}
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")  # JSON is YAML
    return str(path)


def test_mla_head_dims_default_to_deepseek_v3s(tmp_path: Path) -> None:
    # transformers DeepseekV3Config: qk_nope_head_dim=128 and v_head_dim=128 when the config omits them (DeepSeek-V3
    # names 128 and 128), so its weights without the two keys are its weights with them
    given = load_model(_preset(tmp_path, "given", ()))
    bare = load_model(_preset(tmp_path, "bare", ("qk_nope_head_dim", "v_head_dim")))
    assert "per tensor" not in given.weights_summary  # the parameter groups, not config_tensors
    for tp in (1, 8):
        assert bare.estimated_weights_per_gpu(Split.of(tp=tp)) == given.estimated_weights_per_gpu(Split.of(tp=tp))
    assert (bare.head_dim, bare.v_head_dim) == (192, 128)
    # and its linears are NVFP4 (4-bit values and an fp8 scale per 16: 4.5 bits, against bf16's 16): the routed
    # experts, most of DeepSeek-V3's 671 B parameters, under 0.3 of their bf16 bytes, so the whole under half
    bf16 = load_model(_preset(tmp_path, "bf16", (), dtype="bf16"))
    assert 2 * given.estimated_weights_per_gpu(Split.of(tp=8)) < bf16.estimated_weights_per_gpu(Split.of(tp=8))


def test_mla_without_an_indexer_has_no_indexer_heads() -> None:
    # DeepSeek-V3 has no index_* keys (no DSA indexer): 0 heads, top-k 0; DeepSeek-V3.2 names 64 heads of 128
    # and top-k 2,048 (its config.json; SGLang Indexer(n_heads=config.index_n_heads))
    v3 = load_model(str(HF / "deepseek-v3" / "config.json"))
    assert (v3.index_n_heads, v3.index_topk, v3.index_head_dim) == (0, 0, 0)
    v32 = load_model(str(HF / "deepseek-v3.2" / "config.json"))
    assert (v32.index_n_heads, v32.index_topk, v32.index_head_dim) == (64, 2048, 128)


def test_mtp_layers_as_the_config_names_them(tmp_path: Path) -> None:
    # moonshotai/Kimi-K2-Instruct config.json: "num_nextn_predict_layers": 0, a valid 0 (no MTP head), read as 0
    assert load_model(str(HF / "kimi-k2" / "config.json")).num_mtp_layers == 0
    assert load_model(str(HF / "deepseek-v3" / "config.json")).num_mtp_layers == 1  # its config: 1
    # without the key there is none: vLLM SpeculativeConfig.hf_config_override reads
    # getattr(hf_config, "num_nextn_predict_layers", None) as the MTP layers a deepseek_mtp drafter has
    bare = {k: v for k, v in raw("deepseek-v3").items() if k != "num_nextn_predict_layers"}
    assert load_model(write_config(tmp_path, "nomtp", bare)).num_mtp_layers == 0
    # a full-attention MTP family written without its MTP layer: GLM-4.5-Air names 1; 0 is a model with none (the
    # same hf_config_override takes it as n_predict 0), read, not refused
    glm = {**raw("glm-4.5-air"), "num_nextn_predict_layers": 0}
    assert load_model(write_config(tmp_path, "glm", glm)).num_mtp_layers == 0
    llama = raw("llama-3.1-8b")
    assert (
        "num_nextn_predict_layers" not in llama
        and load_model(write_config(tmp_path, "llama", llama)).num_mtp_layers == 0
    )


def test_a_config_without_architectures_but_with_kv_lora_rank_is_mla(tmp_path: Path) -> None:
    # kv_lora_rank is MLA's compressed KV (DeepseekV2AttentionMLA): without "architectures" it is still read as MLA
    cfg = {k: v for k, v in raw("deepseek-v3").items() if k != "architectures"}
    arch = load_model(write_config(tmp_path, "noarch", cfg))
    assert (arch.architecture, arch.kv_lora_rank, arch.qk_rope_head_dim) == ("unknown", 512, 64)


def test_a_config_without_architectures_or_kv_lora_rank_is_full_attention(tmp_path: Path) -> None:
    # no kv_lora_rank: the K and V heads of transformers' LlamaAttention, num_key_value_heads × head_dim each;
    # Llama-3.1-8B's config.json: 8 kv heads × 128, no MLA latent (kv_lora_rank 0), read as full attention
    cfg = {k: v for k, v in raw("llama-3.1-8b").items() if k != "architectures"}
    arch = load_model(write_config(tmp_path, "noarch", cfg))
    assert (arch.architecture, arch.num_kv_heads, arch.head_dim, arch.kv_lora_rank) == ("unknown", 8, 128, 0)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("FFS", "3 letters for 8 layers"), ("FFSFSSFX", "X is neither F nor S")],
)
def test_index_topk_pattern_must_name_each_layer(tmp_path: Path, pattern: str, why: str) -> None:
    # SGLang dsa_layer_skips_topk reads pattern[layer_id] for every layer: a short pattern fails at start
    # (IndexError), another letter is silently "full"; kvplan refuses both, naming the key and the 8 layers
    cfg = {"architectures": ["GlmMoeDsaForCausalLM"], "num_hidden_layers": 8, "kv_lora_rank": 512,
           "qk_rope_head_dim": 64, "index_n_heads": 32, "index_head_dim": 128, "index_topk": 2048,
           "max_position_embeddings": 65536, "index_topk_pattern": pattern}  # fmt: skip
    with pytest.raises(ConfigError, match=r"index_topk_pattern.*expected 8 letters F or S"):
        load_model(write_config(tmp_path, "bad", cfg))


def test_a_model_yaml_without_config_names_the_section(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("schema_version: 1\nname: m\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config.*a model YAML has a 'config' section of Hugging Face fields"):
        load_model(str(path))


def test_a_measured_weight_point_without_ep_is_ep_1() -> None:
    # deepseek-v4-flash's measured point: vllm-project/vllm#41027, TP8 without --enable-expert-parallel (vLLM's
    # default), so ep 1 (SGLang's --ep-size default is 1 too), as `kvplan models --json` prints it
    arch = load_model("deepseek-v4-flash")
    (point,) = arch.measured_weights
    assert (point.tp, point.dp_attention, point.ep) == (8, 1, 1)
    assert arch.measured_weights_for(Split.of(tp=8)) is point
    assert arch.measured_weights_for(Split.of(tp=4)) is None


def test_a_wrapped_decoder_is_read_from_its_text_config() -> None:
    # SGLang KimiK3Config.text_config: models/kimi_k3.py builds KimiK3LinearForCausalLM(config.text_config), a
    # Kimi-Linear decoder of the text_config's 93 layers (tests/data/hf/kimi-k3: its config.json)
    k3 = load_model(str(HF / "kimi-k3" / "config.json"))
    assert (k3.architecture, k3.num_layers) == ("KimiLinearForCausalLM", 93)
    # SGLang Glm5NextConfig.text_config: GLM-5.3-Flash's decoder has the text_config's 45 layers
    flash = load_model("glm-5.3-flash")
    assert (flash.architecture, flash.num_layers) == ("Glm5NextForConditionalGeneration", 45)


def test_no_shared_expert_is_read_not_refused(tmp_path: Path) -> None:
    # SGLang DeepseekV2MoE sizes the shared experts moe_intermediate_size × n_shared_experts: 0 builds none, so a
    # config writing 0 is read (not refused) and weighs less than DeepSeek-V3's own 1 (its config.json)
    full = load_model(_preset(tmp_path, "full", ()))
    zero = load_model(_with(tmp_path, "zero", n_shared_experts=0))
    assert zero.estimated_weights_per_gpu(Split.of(tp=8)) < full.estimated_weights_per_gpu(Split.of(tp=8))


def test_a_dense_config_without_its_mlp_width_is_refused(tmp_path: Path) -> None:
    # Llama's MLP is intermediate_size wide (transformers LlamaConfig); a config.json without it would be planned
    # with no MLP weights (a pool too large by 3 × 4,096 × 14,336 × 2 B a layer on Llama-3.1-8B), so kvplan refuses
    # it in one line naming the key rather than guess (transformers' own default, 11,008, is Llama-2-7B's width)
    cfg = {k: v for k, v in raw("llama-3.1-8b").items() if k != "intermediate_size"}
    with pytest.raises(ConfigError, match=r"intermediate_size: missing \(required for the dense MLP layers\)"):
        load_model(write_config(tmp_path, "nomlp", cfg))


@pytest.mark.parametrize(
    "key",
    [
        "intermediate_size",
        "n_routed_experts",
        "n_shared_experts",
        "first_k_dense_replace",
        "moe_intermediate_size",
        "vocab_size",
    ],
)
def test_an_mla_config_without_its_expert_widths_is_refused(tmp_path: Path, key: str) -> None:
    # transformers DeepseekV3Config fills intermediate_size 18,432, n_routed_experts 256, n_shared_experts 1,
    # first_k_dense_replace 3, moe_intermediate_size 2,048, vocab_size 129,280 where the config omits them,
    # DeepseekV2Config 11,008 / None / None / 0 / 1,407 / 102,400: kvplan read 0 (no dense MLP, no experts, no
    # embeddings: weights silently left out) and now refuses the config in one line naming the key, as for a dense
    # config above
    with pytest.raises(ConfigError, match=rf"{key}: missing"):
        load_model(_preset(tmp_path, "bare", (key,)))


def test_an_mla_preset_without_mtp_layers_has_none(tmp_path: Path) -> None:
    # num_nextn_predict_layers absent: no MTP layer (SGLang / vLLM read getattr(config, "num_nextn_predict_layers", 0)
    # in their DeepSeek MTP paths; transformers' DeepseekV3Config has no such field), the same weights as writing 0
    bare = load_model(_preset(tmp_path, "bare", ("num_nextn_predict_layers",)))
    zero = load_model(_with(tmp_path, "zero", num_nextn_predict_layers=0))
    assert bare.estimated_weights_per_gpu(Split.of(tp=8)) == zero.estimated_weights_per_gpu(Split.of(tp=8))
    assert bare.num_mtp_layers == zero.num_mtp_layers == 0


def test_a_dsa_config_without_its_indexer_heads_is_refused(tmp_path: Path) -> None:
    # vLLM's and SGLang's DSA indexers read config.index_n_heads with no default (an engine cannot build the model);
    # kvplan read 0 and planned no indexer weights (wq_b, weights_proj): now one line naming the key
    cfg = {k: v for k, v in raw("deepseek-v3.2").items() if k != "index_n_heads"}
    with pytest.raises(ConfigError, match=r"index_n_heads: missing"):
        load_model(write_config(tmp_path, "noheads", cfg))


def test_a_hidden_size_under_the_head_count_gives_no_head_dim(tmp_path: Path) -> None:
    # transformers LlamaConfig: head_dim = hidden_size // num_attention_heads when the config names none; 16 // 32 = 0
    # is no head at all: refused naming hidden_size, not planned with 0-byte rows
    cfg = {k: v for k, v in raw("llama-3.1-8b").items() if k != "head_dim"} | {"hidden_size": 16}
    with pytest.raises(ConfigError, match=r"hidden_size: 16 is smaller than num_attention_heads 32: no head_dim"):
        load_model(write_config(tmp_path, "tiny", cfg))


def test_a_dsa_config_with_no_indexer_head_is_refused_and_one_head_is_read(tmp_path: Path) -> None:
    # vLLM's and SGLang's DSA Indexer build wq_b of index_n_heads × index_head_dim rows and weights_proj of
    # index_n_heads: 0 heads is no indexer beside an index_topk, so it is refused; 1 head is an indexer of one head
    # (DeepSeek-V3.2's config.json names 64), read as such
    cfg = raw("deepseek-v3.2")
    with pytest.raises(ConfigError, match=r"index_n_heads: "):
        load_model(write_config(tmp_path, "zero", cfg | {"index_n_heads": 0}))
    one = load_model(write_config(tmp_path, "one", cfg | {"index_n_heads": 1}))
    full = load_model(write_config(tmp_path, "full", cfg))
    assert one.estimated_weights_per_gpu(Split.of(tp=8)) < full.estimated_weights_per_gpu(Split.of(tp=8))


def test_an_mla_config_of_no_routed_expert_is_refused_and_one_is_read(tmp_path: Path) -> None:
    # vLLM's DeepseekV2MoE raises "Tensor parallel size … is greater than the number of experts" when
    # tp_size > n_routed_experts, so a config writing 0 starts at no tp and is refused; 1 expert starts at tp 1
    with pytest.raises(ConfigError, match=r"n_routed_experts: "):
        load_model(_with(tmp_path, "zero", n_routed_experts=0))
    one = load_model(_with(tmp_path, "one", n_routed_experts=1))
    full = load_model(_preset(tmp_path, "full", ()))
    assert one.estimated_weights_per_gpu(Split.of(tp=1)) < full.estimated_weights_per_gpu(Split.of(tp=1))


def _with(tmp_path: Path, name: str, **config: int) -> str:
    """DeepSeek-V3's preset (_preset) with some config keys overwritten."""
    path = Path(_preset(tmp_path, name, ()))
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["config"].update(config)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def test_a_dsa_config_without_index_kpool_pools_nothing(tmp_path: Path) -> None:
    # SGLang's IndexerKPool and vLLM's DSA backends read getattr(hf_config, "index_kpool", 1): DeepSeek-V3.2's
    # config.json names none, so one indexer key a token; SGLang pages DSA by 64 × index_kpool = 64 tokens
    v32 = load_model(str(HF / "deepseek-v3.2" / "config.json"))
    assert "index_kpool" not in raw("deepseek-v3.2")
    assert v32.index_kpool == 1


def test_a_dsa_config_without_index_head_dim_reads_128(tmp_path: Path) -> None:
    # transformers' GlmMoeDsaConfig.__init__ defaults index_head_dim to 128 (GLM-5's and DeepSeek-V3.2's config.json
    # write 128): a DSA config without the key has the indexer rows of one writing it
    cfg = raw("deepseek-v3.2")
    bare = load_model(write_config(tmp_path, "bare", {k: v for k, v in cfg.items() if k != "index_head_dim"}))
    given = load_model(write_config(tmp_path, "given", cfg))
    assert bare.index_head_dim == given.index_head_dim == 128


def test_an_index_skip_topk_offset_of_0_is_read(tmp_path: Path) -> None:
    # SGLang dsa_layer_skips_topk: with an offset a layer i owns the indexer iff max(i - offset + 1, 0) % freq == 0.
    # GLM-5.2 (78 layers, freq 4): offset 3 (its config.json) gives i = 0, 1, 2 and 6, 10, ..., 74: 3 + 18 = 21;
    # offset 0 gives (i + 1) % 4 == 0, i = 3, 7, ..., 75: 19 (0 is a valid offset, validate.NON_NEGATIVE)
    cfg = raw("glm-5.2-freq-only")
    assert load_model(write_config(tmp_path, "three", cfg)).full_indexer_layers == 21
    assert load_model(write_config(tmp_path, "zero", cfg | {"index_skip_topk_offset": 0})).full_indexer_layers == 19


def test_an_mla_config_of_no_dense_layer_is_read(tmp_path: Path) -> None:
    # DeepseekV2DecoderLayer (vLLM and SGLang) builds a dense MLP for layer_idx < first_k_dense_replace and the MoE
    # after: 0 makes every layer MoE (257 experts of 3 × 7,168 × 2,048 against one MLP of 3 × 7,168 × 18,432), so
    # DeepSeek-V3 with 0 weighs more than with its config.json's 3
    zero = load_model(_with(tmp_path, "zero", first_k_dense_replace=0))
    three = load_model(_preset(tmp_path, "three", ()))
    assert zero.estimated_weights_per_gpu(Split.of(tp=8)) > three.estimated_weights_per_gpu(Split.of(tp=8))


@pytest.mark.parametrize("name", ["Llama ForCausalLM", "Llama\x07ForCausalLM", "   "])
def test_an_architecture_that_is_not_one_printable_word_is_refused(tmp_path: Path, name: str) -> None:
    # the first of architectures is echoed in kvplan's one-line errors: a name with a space or a control character
    # (or nothing) is no class transformers or the engines could register, refused naming the entry
    cfg = raw("llama-3.1-8b") | {"architectures": [name]}
    with pytest.raises(ConfigError, match=r"architectures\[0\]: expected a class name"):
        load_model(write_config(tmp_path, "odd", cfg))


def test_a_config_without_head_dim_or_hidden_size_is_refused(tmp_path: Path) -> None:
    # transformers LlamaConfig derives head_dim from hidden_size // num_attention_heads; with neither there is no
    # head width to size a K or V row by: one line naming head_dim, not a guess
    cfg = {k: v for k, v in raw("llama-3.1-8b").items() if k not in ("head_dim", "hidden_size")}
    with pytest.raises(ConfigError, match=r"head_dim: missing \(required\): neither head_dim nor hidden_size"):
        load_model(write_config(tmp_path, "nowidth", cfg))


@pytest.mark.parametrize(("value", "kind"), [([], "a list"), (5, "an integer")])
def test_architectures_that_is_no_list_of_names_is_refused(tmp_path: Path, value: object, kind: str) -> None:
    # transformers' PretrainedConfig.architectures is a list of class names (the engines take architectures[0]): an
    # empty list or a number names no class, refused in one line naming the key rather than an IndexError/TypeError
    cfg = raw("llama-3.1-8b") | {"architectures": value}
    with pytest.raises(ConfigError, match=rf"architectures: expected a list of class names, got {kind}"):
        load_model(write_config(tmp_path, "odd", cfg))

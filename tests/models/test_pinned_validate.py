"""A config's values checked where it is read (kvplan/models/validate.py), pinned at the bounds the mutation check
moves: the smallest value each kind of field takes, a list of one entry a layer, layer numbers from 0 to
num_hidden_layers − 1, DeepSeek-V4's compress_ratios (vLLM ``DeepseekV4MultiHeadLatentAttentionWrapper`` reads
``compress_ratios[layer_id]``, the MTP layers' after the decoder's), how a bad value is shown, and what SGLang is
not planned for yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import ConfigError, InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

HF = Path(__file__).parents[1] / "data" / "hf"


def _load(tmp_path: Path, base: str, **changes: Any) -> Any:
    cfg = {**json.loads((HF / base / "config.json").read_text()), **changes}
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return load_model(str(folder / "config.json"))


@pytest.mark.parametrize(
    ("base", "key"),
    [
        ("llama-3.1-8b", "num_key_value_heads"),  # a count: at least 1 (vLLM get_num_kv_heads divides by it)
        ("deepseek-v3.2", "index_topk"),  # a token count: a DSA layer keeping 0 tokens attends to nothing
    ],
)
def test_the_smallest_count_is_1(tmp_path: Path, base: str, key: str) -> None:
    _load(tmp_path, base, **{key: 1})
    with pytest.raises(ConfigError, match=rf"{key}: expected an integer >= 1"):
        _load(tmp_path, base, **{key: 0})


def test_may_be_zero_fields_take_0_and_refuse_minus_1(tmp_path: Path) -> None:
    # DeepSeek-V3 with no dense layers and no shared experts: 0 by design
    arch = _load(tmp_path, "deepseek-v3", first_k_dense_replace=0, n_shared_experts=0)
    assert arch.num_layers == 61
    with pytest.raises(ConfigError, match=r"first_k_dense_replace: expected an integer >= 0"):
        _load(tmp_path, "deepseek-v3", first_k_dense_replace=-1)


def test_a_layer_count_is_bounded_by_the_layer_limit_and_a_rope_width_by_the_dimension_limit(tmp_path: Path) -> None:
    # qk_rope_head_dim is a width (up to MAX_DIM), first_k_dense_replace a layer count (up to MAX_LAYERS)
    from kvplan import limits

    with pytest.raises(ConfigError, match=rf"first_k_dense_replace: .*{limits.MAX_LAYERS:,}"):
        _load(tmp_path, "deepseek-v3", first_k_dense_replace=limits.MAX_LAYERS + 1)
    with pytest.raises(ConfigError, match=r"qk_rope_head_dim"):
        _load(tmp_path, "deepseek-v3", qk_rope_head_dim=limits.MAX_DIM + 1)
    _load(tmp_path, "deepseek-v3", qk_rope_head_dim=limits.MAX_LAYERS + 64)  # a width past the layer limit


def test_a_boolean_is_a_json_boolean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tie_word_embeddings: expected true or false, got 'yes'"):
        _load(tmp_path, "llama-3.1-8b", tie_word_embeddings="yes")
    assert _load(tmp_path, "llama-3.1-8b", tie_word_embeddings=True).num_layers == 32


@pytest.mark.parametrize(("count", "ok"), [(32, True), (31, False), (33, False)])
def test_layer_types_one_a_layer(tmp_path: Path, count: int, ok: bool) -> None:
    types = ["full_attention"] * count
    if ok:
        assert _load(tmp_path, "llama-3.1-8b", layer_types=types).num_layers == 32
    else:
        with pytest.raises(ConfigError, match=rf"layer_types: has {count} entries for 32 layers"):
            _load(tmp_path, "llama-3.1-8b", layer_types=types)


@pytest.mark.parametrize("bad", [48, -1, True, "0"])
def test_mlp_only_layers_are_layer_numbers_0_to_47(tmp_path: Path, bad: object) -> None:
    # Qwen3-30B-A3B: 48 layers, so 0 .. 47 (vLLM Qwen3MoeDecoderLayer: layer_idx not in mlp_only_layers)
    assert _load(tmp_path, "qwen3-30b-a3b", mlp_only_layers=[0, 47]).num_layers == 48
    shown = repr(bad)
    with pytest.raises(ConfigError, match=rf"mlp_only_layers\[1\]: expected a layer number from 0 to 47, got {shown}"):
        _load(tmp_path, "qwen3-30b-a3b", mlp_only_layers=[0, bad])


def test_compress_ratios_count_the_mtp_layers(tmp_path: Path) -> None:
    # DeepSeek-V4-Flash: 43 layers + 1 MTP layer = 44 ratios; 2 MTP layers need 45
    base = json.loads((HF / "deepseek-v4-flash" / "config.json").read_text())["compress_ratios"]
    with pytest.raises(ConfigError, match=r"compress_ratios: expected 45 ratios \(43 layers \+ 2 MTP\), got 44"):
        _load(tmp_path, "deepseek-v4-flash", num_nextn_predict_layers=2)
    assert _load(tmp_path, "deepseek-v4-flash", num_nextn_predict_layers=2, compress_ratios=[*base, 0]).num_layers == 43
    with pytest.raises(ConfigError, match=r"compress_ratios: expected 44 ratios \(43 layers \+ 1 MTP\), got 4$"):
        _load(tmp_path, "deepseek-v4-flash", compress_ratios=4)


@pytest.mark.parametrize(("ratio", "ok"), [(0, True), (1, True), (4, True), (128, True), (2, False), (3, False),
                                           (5, False), (127, False), (129, False)])  # fmt: skip
def test_a_compress_ratio_is_0_1_4_or_128(tmp_path: Path, ratio: int, ok: bool) -> None:
    base = json.loads((HF / "deepseek-v4-flash" / "config.json").read_text())["compress_ratios"]
    ratios = [*base[:-1], ratio]  # the MTP layer's ratio
    if ok:
        assert _load(tmp_path, "deepseek-v4-flash", compress_ratios=ratios).num_layers == 43
    else:
        with pytest.raises(
            ConfigError, match=rf"compress_ratios\[43\]: expected a ratio 0 \(window only\), 4 or 128, got {ratio}"
        ):
            _load(tmp_path, "deepseek-v4-flash", compress_ratios=ratios)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("x" * 38, "'" + "x" * 38 + "'"),  # repr is 40 characters: shown whole
        ("x" * 39, "'" + "x" * 36 + "…"),  # 41: the first 37 and an ellipsis
        ({"a": 1}, "dict"),  # not a scalar: its type
    ],
)
def test_a_bad_value_is_shown_in_40_characters_at_most(tmp_path: Path, value: object, shown: str) -> None:
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "llama-3.1-8b", tie_word_embeddings=value)
    assert str(e.value).endswith(f"tie_word_embeddings: expected true or false, got {shown}")


@pytest.mark.parametrize(
    ("engine", "dtype", "refused"),
    [("sglang", "float32", True), ("sglang", "float", True), ("sglang", "float16", False), ("vllm", "float32", False)],
)
def test_a_4_byte_kv_cache_is_refused_on_sglang_only(engine: str, dtype: str, refused: bool) -> None:
    dep = load_deployment(None, ["model=llama-3.1-8b", f"engine={engine}", "gpu=h100", "tp=1", "gpus_per_node=1",
                                 f"dtype={dtype}"])  # fmt: skip
    arch = load_model("llama-3.1-8b")
    if refused:
        with pytest.raises(InputError, match=rf"does not yet plan --dtype {dtype} \(a 4-byte KV cache\) on SGLang"):
            plan_pool(arch, dep)
    else:
        assert plan_pool(arch, dep).rows > 0


@pytest.mark.parametrize("mtp", [{"num_nextn_predict_layers": 0}, {"num_nextn_predict_layers": None}])
def test_no_mtp_layer_needs_one_ratio_a_decoder_layer(tmp_path: Path, mtp: dict[str, Any]) -> None:
    # 0 MTP layers (or the key left out): 43 ratios for the 43 decoder layers
    base = json.loads((HF / "deepseek-v4-flash" / "config.json").read_text())
    cfg = {k: v for k, v in base.items() if k != "num_nextn_predict_layers"}
    if mtp["num_nextn_predict_layers"] is not None:
        cfg.update(mtp)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, "compress_ratios": base["compress_ratios"][:43]}))
    assert load_model(str(folder / "config.json")).num_layers == 43


def test_sglang_refuses_per_layer_kv_heads_only_where_they_differ(tmp_path: Path) -> None:
    # a DeciLM config whose every layer has 64 // 8 = 8 kv heads is one uniform GQA cache: planned on SGLang; one
    # whose layers differ (8 and 4) is refused there (kvplan does not plan it yet)
    def deci(groups: list[int]) -> Any:
        blocks = [{"attention": {"n_heads_in_group": g, "no_op": False}, "ffn": {"ffn_mult": 2.625}} for g in groups]
        cfg = {"architectures": ["DeciLMForCausalLM"], "num_hidden_layers": len(groups), "num_attention_heads": 64,
               "hidden_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072,
               "torch_dtype": "bfloat16", "block_configs": blocks}  # fmt: skip
        folder = tmp_path / f"deci{len(set(groups))}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        return str(folder / "config.json")

    sets = ["engine=sglang", "gpu=h100", "tp=1", "gpus_per_node=1", "weights_per_gpu=20GiB", "kv_cache_dtype=auto"]
    uniform = deci([8, 8, 8])
    assert plan_pool(load_model(uniform), load_deployment(None, [f"model={uniform}", *sets])).rows > 0
    mixed = deci([8, 16, 8])
    with pytest.raises(InputError, match=r"does not yet plan per-layer kv heads .* on SGLang"):
        plan_pool(load_model(mixed), load_deployment(None, [f"model={mixed}", *sets]))


def test_a_shared_expert_width_of_0_is_no_shared_expert(tmp_path: Path) -> None:
    # Qwen/Qwen3-Coder-30B-A3B-Instruct's verbatim config.json carries "shared_expert_intermediate_size": 0; vLLM
    # and SGLang (qwen2_moe.py, qwen3_next.py) build the shared expert only "if config.shared_expert_intermediate_size
    # > 0", and Qwen3-MoE has none: the config loads, with Qwen3-30B-A3B's parameters (the same 48 sparse layers,
    # 128 experts × 768, hidden 2048, vocab 151,936; its intermediate_size 5,472 is unused, no dense layer)
    coder = load_model(str(HF / "qwen3-coder-30b-a3b" / "config.json"))
    base = load_model(str(HF / "qwen3-30b-a3b" / "config.json"))
    assert coder.total_params == base.total_params and coder.max_position_embeddings == 262_144
    with pytest.raises(ConfigError, match=r"shared_expert_intermediate_size: expected an integer >= 0"):
        _load(tmp_path, "qwen3-coder-30b-a3b", shared_expert_intermediate_size=-1)

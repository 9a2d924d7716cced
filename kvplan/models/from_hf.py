"""A model preset or a Hugging Face config.json -> ModelArch: the architecture tables, the config's keys read into
the shapes the engines size from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvplan import limits
from kvplan.errors import ConfigError
from kvplan.models import decilm, quant, validate, vlm
from kvplan.models.activation import activation_dims
from kvplan.models.arch import IndexerRule, ModelArch, WeightPoint, full_indexer_layers
from kvplan.models.preset_weights import preset_weights
from kvplan.models.presets import check_schema, resolve_preset
from kvplan.models.reader import Doc, Reader, _kind, _show, read_file
from kvplan.models.rope import config_rope, read_documented
from kvplan.models.shards import shard_dims
from kvplan.models.snapshot import with_checkpoint
from kvplan.models.weights import MoeShape, param_groups, param_groups_from_hf

_HF_KEYS = {
    "architectures", "model_type", "num_hidden_layers", "num_nextn_predict_layers", "hidden_size",
    "num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "index_head_dim", "index_n_heads", "index_topk", "index_kpool",
    "indexer_types", "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset",
    "first_k_dense_replace", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "moe_intermediate_size", "intermediate_size", "vocab_size", "tie_word_embeddings",
    "max_position_embeddings", "torch_dtype", "dtype", "quantization_config", "head_dim", "block_configs",
    "num_experts", "num_local_experts", "decoder_sparse_step", "mlp_only_layers", "sliding_window",
    "use_sliding_window", "attention_bias", "layer_types", "compress_ratios", "full_attention_interval",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim", "mamba_ssm_dtype", "linear_attn_config",
    "text_config", "vision_config",  # GLM-5.3-Flash (glm5_next): the decoder's fields and the vision tower
    "o_lora_rank", "o_groups", "num_hash_layers", "hc_mult", "topk_method", "expert_dtype",
    "model_max_length", "num_shared_experts", "num_experts_per_token", "moe_layer_freq", "mla_use_nope",
    "mla_use_output_gate", "routed_expert_hidden_size", "latent_moe_use_norm", "attn_res_block_size",
    "shared_expert_intermediate_size", "partial_rotary_factor",
    "indexer_rope_interleave",  # kvplan.models.additions: the DSA indexer shares the MLA rope cache
    "language_config", "projector_config",  # DeepSeek-VL2 (kvplan.models.vlm)
    "residual_moe",  # Grok-2: a dense MLP beside the experts (kvplan.models.params_grok)
}  # fmt: skip

MLA_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                     "GlmMoeDsaForCausalLM")  # fmt: skip
"""MLA models (DSA when the config has an indexer): DeepSeek-V2/V3/R1, Kimi-K2, DeepSeek-V3.2, GLM-5.x."""
FULL_ATTENTION_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
                                "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Glm4MoeForCausalLM",
                                "DeciLMForCausalLM", "Grok1ForCausalLM")  # fmt: skip
"""Full-attention (MHA / GQA / MQA) models kvplan plans, every layer the same."""
HYBRID_ARCHITECTURES = ("GptOssForCausalLM", "Qwen3NextForCausalLM", "KimiLinearForCausalLM", "DeepseekV4ForCausalLM",
                        "Glm5NextForConditionalGeneration")  # fmt: skip
"""Models whose layers mix cache kinds (kvplan.models.cache, kvplan.models.hybrid), each planned by the engines'
hybrid chains (kvplan.engines.sglang_hybrid, kvplan.engines.vllm_hybrid)."""
QWEN3_5_ARCHITECTURES = ("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                         "Qwen3_5MoeForCausalLM")  # fmt: skip
"""Qwen3.5-family GDN hybrids (dense and MoE), read from their ``text_config`` as the Qwen3-Next family."""
_MODEL_KEYS = {"schema_version", "name", "description", "source", "checkpoint_dtype", "config",
               "measured_weights", "documented_rope_scaling"}  # fmt: skip


def local_ref(ref: str, env: Mapping[str, str] | None = None) -> str:
    """``--model ORG/NAME[@REVISION]`` -> the snapshot folder to plan from (the local Hugging Face cache, kvplan's
    cache, else the Hub: kvplan.models.hub); any other ref unchanged (an existing path, a preset, a file name)."""
    if ref.endswith((".yaml", ".yml", ".json")) or ("@" not in ref and ref.count("/") != 1):
        return ref
    try:
        if Path(ref).exists():
            return ref
    except OSError:
        return ref
    from kvplan.models.hub import model_snapshot  # the network code, imported only for a repo id (start-up)

    return str(model_snapshot(ref, env))


def load_model(ref: str) -> ModelArch:
    """A preset name, a kvplan model YAML, a Hugging Face config.json or snapshot folder, or a repo id
    ORG/NAME[@REVISION] (the local caches, else the Hub's configs and safetensors headers: kvplan.models.hub)."""
    if ("@" in ref or ref.count("/") == 1) and not ref.endswith((".yaml", ".yml", ".json")):  # ORG/NAME[@REV]
        ref = local_ref(ref)
    doc = _with_modelopt_quantization(resolve_preset("models", ref))
    r = Reader(doc)
    if doc.source.endswith(".json") or "config" not in r.data:
        if not doc.source.endswith(".json"):
            r.fail("config", "missing: a model YAML has a 'config' section of Hugging Face fields")
        stem = Path(doc.source).parent.name or Path(doc.source).stem
        arch = replace(
            _model_from_hf(r, name=stem, source=doc.source, strict=False, checkpoint_dtype=None),
            config_rope=config_rope(r.data),
            checkpoint_dtype_bytes=quant.stored_dtype_bytes(r.data),
        )

        return with_checkpoint(arch, doc.source, r.data)
    check_schema(r)
    r.reject_unknown(_MODEL_KEYS)
    arch = _model_from_hf(
        r.sub("config"),
        name=r.get_str("name", required=True),
        source=doc.source,
        strict=True,
        checkpoint_dtype=r.get_choice("checkpoint_dtype", ("fp8", "nvfp4", "bf16", "fp16", "fp32")),
        description=r.get_str("description", default=""),
    )
    points = []
    if r.has("measured_weights"):
        items = r.data["measured_weights"]
        if not isinstance(items, list):
            r.fail("measured_weights", f"expected a list, got {_kind(items)}")
        for i in range(len(items)):
            p = Reader(doc, ("measured_weights", i), items[i])
            p.reject_unknown({"tp", "dp_attention", "ep", "bytes", "source"})
            points.append(
                WeightPoint(
                    tp=p.get_int("tp", required=True, maximum=limits.MAX_GPUS),
                    dp_attention=p.get_int("dp_attention", default=1, maximum=limits.MAX_GPUS),
                    ep=p.get_int("ep", default=1, maximum=limits.MAX_GPUS),
                    bytes=p.get_bytes("bytes", required=True, minimum=limits.MIN_MEMORY_KNOB_BYTES),
                    source=p.get_str("source", required=True),
                )
            )

    dtype = r.data.get("checkpoint_dtype")
    rope = read_documented(r)
    arch = replace(
        arch, measured_weights=tuple(points), documented_rope_scaling=rope, config_rope=config_rope(r.data["config"]),
        checkpoint_dtype_bytes=quant.stored_dtype_bytes(r.data["config"]),
    )  # fmt: skip
    return preset_weights(arch, doc.source, r.data["config"], dtype)


MODELOPT_QUANT_FILE = "hf_quant_config.json"
"""NVIDIA ModelOpt checkpoints (FP8, NVFP4) keep their quantization beside config.json, not in it."""


def _with_modelopt_quantization(doc: Doc) -> Doc:
    """A config.json without ``quantization_config`` next to ModelOpt's ``hf_quant_config.json``: that file is the
    checkpoint's quantization, as the engines read it (vLLM ``ModelConfig._parse_quant_hf_config`` falls back to
    ``hf_quant_config.json``; SGLang ``ModelConfig._parse_modelopt_quant_config``). Without it an NVFP4 checkpoint
    would be planned as bf16: nvidia/DeepSeek-V3.2-NVFP4 at tp 8 is 48.83 GiB a GPU, not 160 GiB
    (tests/models/test_weights_published.py). Read with the same limits and strict JSON as config.json."""
    source = Path(doc.source)
    if source.name != "config.json" or not isinstance(doc.data, dict) or "quantization_config" in doc.data:
        return doc
    beside = source.parent / MODELOPT_QUANT_FILE
    try:
        if not beside.is_file():
            return doc
    except OSError:
        return doc
    quant = read_file(beside)
    if not isinstance(quant.data, dict):
        raise ConfigError("expected a JSON object", source=quant.source)
    return replace(doc, data={**doc.data, "quantization_config": quant.data})


def _model_from_hf(
    r: Reader,
    *,
    name: str,
    source: str,
    strict: bool,
    checkpoint_dtype: str | None,
    description: str = "",
) -> ModelArch:
    if strict:
        r.reject_unknown(_HF_KEYS)
    r, architecture = _decoder(r, _architecture(r))
    nested = vlm.language_section(r, architecture)
    if nested is not None:  # DeepSeek-VL2: the language model's fields in language_config, MLA or MHA
        return nested.finish(_language_model(nested, name=name, source=source, description=description))
    # the architecture first: a VLM kvplan does not plan keeps its fields in text_config, and "num_hidden_layers:
    # missing" would read as a broken file (Mistral-Small-4, Qwen3.8-Flash-Next: docs/families.md)
    supported = (*MLA_ARCHITECTURES, *FULL_ATTENTION_ARCHITECTURES, *HYBRID_ARCHITECTURES, *QWEN3_5_ARCHITECTURES,
                 vlm.KIMI_K25, vlm.DEEPSEEK_VL2)  # fmt: skip
    if architecture != "unknown" and architecture not in supported:
        r.fail("architectures", f"{architecture} is not a model kvplan plans; supported: {', '.join(supported)}")
    num_layers = r.get_int("num_hidden_layers", required=True, maximum=limits.MAX_LAYERS)
    validate.check_config(r, num_layers)
    if architecture in (*HYBRID_ARCHITECTURES, *QWEN3_5_ARCHITECTURES) and architecture != "GptOssForCausalLM":
        from kvplan.models import hybrid

        return hybrid.from_hf(r, name=name, source=source, description=description, architecture=architecture,
                              num_layers=num_layers)  # fmt: skip
    full_attention = (*FULL_ATTENTION_ARCHITECTURES, "GptOssForCausalLM")
    if architecture in full_attention or (architecture == "unknown" and not r.has("kv_lora_rank")):
        return _full_attention_from_hf(
            r, name=name, source=source, description=description, num_layers=num_layers, architecture=architecture
        )
    kv_lora_rank = r.get_int("kv_lora_rank", required=True, maximum=limits.MAX_DIM)
    rope = r.get_int("qk_rope_head_dim", required=True, maximum=limits.MAX_DIM)
    ix = _indexer(r, num_layers)
    groups, summary, assumptions = _mla_weights(r, source, num_layers, kv_lora_rank, rope, ix, checkpoint_dtype)
    return ModelArch(
        name=name,
        source=source,
        description=description,
        architecture=architecture,
        num_layers=num_layers,
        num_mtp_layers=r.get_int("num_nextn_predict_layers", default=0, minimum=0, maximum=limits.MAX_LAYERS),
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=rope,
        num_attention_heads=r.get_int("num_attention_heads", default=0, minimum=0, maximum=limits.MAX_DIM),
        # MLA prefill attends with qk_nope + rope per query head and v_head_dim values (prefix pairs' FLOPs)
        head_dim=r.get_int("qk_nope_head_dim", default=128, maximum=limits.MAX_DIM) + rope,
        v_head_dim=r.get_int("v_head_dim", default=128, maximum=limits.MAX_DIM),
        max_position_embeddings=r.get_tokens("max_position_embeddings", required=True),
        index_head_dim=ix.head_dim,
        index_n_heads=_index_heads(r, ix),
        index_topk=ix.topk,
        index_kpool=r.get_int("index_kpool", default=1, maximum=limits.MAX_DIM),
        indexer_full=ix.flags,
        indexer_rule=ix.rule,
        index_topk_freq=ix.freq,
        index_skip_topk_offset=ix.offset,
        index_topk_pattern=ix.pattern,
        param_groups=groups,
        weights_summary=summary,
        weights_assumptions=assumptions,
        activation=activation_dims(r.data),
        shards=shard_dims(r.data, source),
    )


def _decoder(r: Reader, architecture: str) -> tuple[Reader, str]:
    """The decoder's fields of a config that wraps them in ``text_config``, and the architecture they are read as."""
    if r.has("text_config"):
        validate.check_fields(r)  # the wrapper's own fields (tie_word_embeddings, ...) before the decoder's
    if architecture == "Glm5NextForConditionalGeneration" and r.has("text_config"):
        r = r.sub("text_config")  # GLM-5.3-Flash: the decoder's fields (SGLang Glm5NextConfig.text_config)
    if architecture == "KimiK3ForConditionalGeneration" and r.has("text_config"):
        # Kimi-K3: a KimiLinearForCausalLM text_config beside a vision tower (SGLang KimiK3Config.text_config,
        # models/kimi_k3.py KimiK3LinearForCausalLM(config.text_config)); its caches are Kimi-Linear's
        r, architecture = r.sub("text_config"), "KimiLinearForCausalLM"
    if architecture in QWEN3_5_ARCHITECTURES and r.has("text_config"):
        r = r.sub("text_config")  # Qwen3.5 / 3.6 / 3.8 dense: the decoder's fields (kvplan.models.hybrid)
    return r, architecture


@dataclass(frozen=True)
class _Indexer:
    """A DSA config's indexer fields, and the layers that own an indexer (none without ``index_topk``)."""

    topk: int
    head_dim: int
    pattern: str | None
    freq: int
    offset: int | None
    flags: tuple[bool, ...] = ()
    rule: IndexerRule = IndexerRule.NONE


def _index_heads(r: Reader, ix: _Indexer) -> int:
    """A DSA indexer's heads, required (vLLM's and SGLang's indexers read config.index_n_heads with no default) and
    at least one; without index_topk there is no indexer, and the key is not read."""
    return int(r.get_int("index_n_heads", required=True, maximum=limits.MAX_DIM)) if ix.topk else 0


def _indexer(r: Reader, num_layers: int) -> _Indexer:
    index_topk = r.get_int("index_topk", default=0, minimum=0, maximum=limits.MAX_TOKENS)
    index_head_dim = r.get_int("index_head_dim", default=128 if index_topk else 0, maximum=limits.MAX_DIM)
    pattern = r.get_str("index_topk_pattern")
    freq = r.get_int("index_topk_freq", default=1, maximum=limits.MAX_LAYERS)
    offset = r.get_int("index_skip_topk_offset", default=None, minimum=0, maximum=limits.MAX_LAYERS)
    fields = _Indexer(index_topk, index_head_dim, pattern, freq, offset)
    if not index_topk:
        return fields
    types = r.get_str_list("indexer_types", ("full", "shared"))
    if types is not None and len(types) != num_layers:
        r.fail("indexer_types", f"has {len(types)} entries for {num_layers} layers")
    if types is None and pattern is not None and (len(pattern) != num_layers or set(pattern) - {"F", "S"}):
        r.fail("index_topk_pattern", f"expected {num_layers} letters F or S")
    flags, rule = full_indexer_layers(num_layers, indexer_types=types, pattern=pattern, freq=freq, offset=offset)
    return replace(fields, flags=flags, rule=rule)


def _mla_weights(
    r: Reader,
    source: str,
    num_layers: int,
    kv_lora_rank: int,
    rope: int,
    ix: _Indexer,
    checkpoint_dtype: str | None,
) -> tuple[tuple[Any, ...], str, tuple[str, ...]]:
    """An MLA / DSA config's parameter groups, their summary and the assumptions read into them."""
    explicit_dtype = checkpoint_dtype is not None
    said: tuple[str, ...] = ()
    if checkpoint_dtype is None:  # the one reading of quantization_config (kvplan.models.quant), with what it says
        q = quant.resolve(r.data, source, fail=r.fail)
        checkpoint_dtype, said = quant.linear_format(q), q.assumptions
    hidden = r.get_int("hidden_size", default=0, maximum=limits.MAX_DIM)
    groups: tuple[Any, ...] = ()
    summary, assumptions = "", tuple[str, ...]()
    if hidden:
        heads = r.get_int("num_attention_heads", required=True, maximum=limits.MAX_DIM)
        shape = MoeShape(
            hidden_size=hidden,
            num_layers=num_layers,
            num_mtp_layers=r.get_int("num_nextn_predict_layers", default=0, minimum=0, maximum=limits.MAX_LAYERS),
            num_attention_heads=heads,
            q_lora_rank=r.get_int("q_lora_rank", default=None, maximum=limits.MAX_DIM),
            kv_lora_rank=kv_lora_rank,
            qk_nope_head_dim=r.get_int("qk_nope_head_dim", default=128, maximum=limits.MAX_DIM),
            qk_rope_head_dim=rope,
            v_head_dim=r.get_int("v_head_dim", default=128, maximum=limits.MAX_DIM),
            index_n_heads=_index_heads(r, ix),
            index_head_dim=ix.head_dim,
            # required: DeepseekV2Config and DeepseekV3Config default them differently (first_k_dense_replace 0 / 3,
            # intermediate_size 11,008 / 18,432, n_routed_experts None / 256, n_shared_experts None / 1,
            # moe_intermediate_size 1,407 / 2,048, vocab_size 102,400 / 129,280; GlmMoeDsaConfig's 154,880), and every
            # published MLA config names them; kvplan read 0
            # widths and the expert count at least 1, as validate.POSITIVE refuses 0 first (vLLM's DeepseekV2MoE raises
            # when tp_size > n_routed_experts: 0 experts start at no tp)
            first_k_dense_replace=r.get_int("first_k_dense_replace", required=True, minimum=0, maximum=limits.MAX_DIM),
            intermediate_size=r.get_int("intermediate_size", required=True, maximum=limits.MAX_DIM),
            n_routed_experts=r.get_int("n_routed_experts", required=True, maximum=limits.MAX_DIM),
            n_shared_experts=r.get_int("n_shared_experts", required=True, minimum=0, maximum=limits.MAX_DIM),
            moe_intermediate_size=r.get_int("moe_intermediate_size", required=True, maximum=limits.MAX_DIM),
            vocab_size=r.get_int("vocab_size", required=True, maximum=limits.MAX_DIM),
            tie_word_embeddings=r.get_bool("tie_word_embeddings", default=False),
        )
        if explicit_dtype or ix.topk:  # a preset, or DSA: one checkpoint dtype (the DSA goldens' groups)
            groups, assumptions = param_groups(shape, checkpoint_dtype=checkpoint_dtype), said
        else:  # plain MLA config.json: every module in the scheme its quantization_config gives it
            w = param_groups_from_hf(r.data, source, fail=r.fail, mla=shape)
            groups, summary, assumptions = w.groups, w.summary, w.assumptions
    return groups, summary, assumptions


def _language_model(nested: vlm.LanguageSection, *, name: str, source: str, description: str) -> ModelArch:
    """A VLM's language model as the engines build it (kvplan.models.vlm): the MLA reader, or full attention."""
    r = nested.reader
    if nested.mla:
        return _model_from_hf(r, name=name, source=source, strict=False, checkpoint_dtype=None, description=description)
    num_layers = r.get_int("num_hidden_layers", required=True, maximum=limits.MAX_LAYERS)
    validate.check_config(r, num_layers)
    return _full_attention_from_hf(
        r, name=name, source=source, description=description, num_layers=num_layers, architecture=vlm.DEEPSEEK_VL2
    )


def _full_attention_from_hf(
    r: Reader, *, name: str, source: str, description: str, num_layers: int, architecture: str
) -> ModelArch:
    """A full-attention (MHA / GQA / MQA) model: heads, kv heads and head_dim, every layer the same.

    ``num_key_value_heads`` defaults to ``num_attention_heads`` (MHA) and ``head_dim`` to hidden_size //
    num_attention_heads, as transformers does; the query heads must be a multiple of the kv heads.
    """
    heads = r.get_int("num_attention_heads", required=True, maximum=limits.MAX_DIM)
    per_layer = decilm.kv_heads_per_layer(r, num_layers, heads) if architecture == "DeciLMForCausalLM" else ()
    kv_heads = max(per_layer) if per_layer else r.get_int("num_key_value_heads", default=heads, maximum=limits.MAX_DIM)
    if heads % kv_heads:
        r.fail(
            "num_key_value_heads",
            f"{kv_heads} does not divide num_attention_heads {heads}: each kv head serves a whole group of query heads",
        )
    hidden = r.get_int("hidden_size", default=0, maximum=limits.MAX_DIM)  # 0 given: refused by validate.POSITIVE
    if r.has("head_dim"):
        head_dim = r.get_int("head_dim", required=True, maximum=limits.MAX_DIM)
    elif hidden:
        head_dim = hidden // heads
        if head_dim == 0:
            r.fail("hidden_size", f"{hidden} is smaller than num_attention_heads {heads}: no head_dim")
    else:
        r.fail("head_dim", "missing (required): neither head_dim nor hidden_size is given")
    from kvplan.models import hybrid

    layers = hybrid.sliding_layers(r, num_layers, architecture, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    groups: tuple[Any, ...] = ()
    summary, assumptions = "", decilm.NOT_COUNTED
    if not per_layer or r.has("intermediate_size"):  # DeciLM's MLP widths are per block (ffn_mult): not counted
        w = param_groups_from_hf(r.data, source, fail=r.fail)
        groups, summary, assumptions = w.groups, w.summary, w.assumptions
    return ModelArch(
        layers=layers,
        name=name,
        source=source,
        description=description,
        architecture=architecture,
        num_layers=num_layers,
        num_mtp_layers=r.get_int("num_nextn_predict_layers", default=0, minimum=0, maximum=limits.MAX_LAYERS),
        max_position_embeddings=r.get_tokens("max_position_embeddings", required=True),
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        kv_heads_per_layer=per_layer,
        head_dim=head_dim,
        v_head_dim=head_dim,
        param_groups=groups,
        weights_summary=summary,
        weights_assumptions=assumptions,
        activation=activation_dims(r.data),
        shards=shard_dims(r.data, source),
    )


def _architecture(r: Reader) -> str:
    """The first of ``architectures`` (a list of class names), or 'unknown' when the config has none."""
    if not r.has("architectures"):
        return "unknown"
    archs = r.data["architectures"]
    if isinstance(archs, str) and _class_name(archs):
        return archs.strip()
    if not isinstance(archs, list) or not archs:
        r.fail("architectures", f"expected a list of class names, got {_kind(archs)} {_show(archs)}")
    for i, a in enumerate(archs):
        if not isinstance(a, str) or not _class_name(a):
            r.fail(("architectures", i), f"expected a class name, got {_kind(a)} {_show(a)}")
    return str(archs[0]).strip()


def _class_name(text: str) -> bool:
    """One printable word (a class name is echoed in messages: "0\\n0" would break the one-line error)."""
    name = text.strip()
    return bool(name) and name.isprintable() and not any(ch.isspace() for ch in name)

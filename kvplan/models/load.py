"""Config files -> ModelArch / Deployment / Gpu, read through kvplan.models.reader (the one module that imports yaml).

Every error names the file, the key path and, for YAML and JSON, the line:
``glm.yaml:12: config.num_hidden_layers: expected a positive integer, got -8``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from kvplan import limits
from kvplan.errors import ConfigError, InputError
from kvplan.models import decilm, quant, validate
from kvplan.models.activation import activation_dims
from kvplan.models.arch import IndexerRule, ModelArch, Split, WeightPoint, full_indexer_layers
from kvplan.models.deploy import (
    AUTO_FIT,
    ENGINE_KNOBS,
    ENGINES,
    KNOBS,
    KV_CACHE_DTYPES,
    MODEL_DTYPES,
    QUANTIZATIONS,
    Deployment,
    Gpu,
    Requirements,
)
from kvplan.models.engine_flags import knob_for_prefix, nearest_knob, spellings
from kvplan.models.formats import MlaLayout
from kvplan.models.pipeline import parse_layer_partition
from kvplan.models.preset_repos import PRESET_ALIASES, canonical_preset
from kvplan.models.preset_weights import preset_weights
from kvplan.models.reader import Doc, Reader, _kind, _show, parse_text, read_file
from kvplan.models.rope import ROPE_TYPES, config_rope, read_documented
from kvplan.models.shards import shard_dims
from kvplan.models.snapshot import with_checkpoint
from kvplan.models.weights import MoeShape, param_groups, param_groups_from_hf
from kvplan.units import GiB, MiB, parse_concurrency, parse_percent_ppm
from kvplan.versions import rules_for

SCHEMA_VERSION = 1
DEFAULT_DEPLOYMENT = "glm-5.3-8xh200-sglang"


# --------------------------------------------------------------------------- presets

_PRESET_NAME = re.compile(r"^[a-z0-9][a-z0-9._+-]{0,99}$")


def _configs() -> Any:
    return resources.files("kvplan") / "configs"


def preset_names(kind: str) -> list[str]:
    folder = _configs() / kind
    return sorted(p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _preset_doc(kind: str, name: str) -> Doc:
    """A built-in preset by name, case-insensitively (``GLM-5.3`` is ``glm-5.3``)."""
    key = canonical_preset(name) if kind == "models" else name.strip().lower()
    if _PRESET_NAME.match(key) and key in preset_names(kind):
        item = _configs() / kind / f"{key}.yaml"
        return parse_text(item.read_text(encoding="utf-8"), f"{kind}/{key}.yaml (built-in)")
    names = ", ".join(sorted([*preset_names(kind), *(PRESET_ALIASES if kind == "models" else ())]))
    raise InputError(f"unknown {kind[:-1]} preset {_show(name)}: choose one of {names}, or give a file path")


def _resolve(kind: str, ref: str, base: Path | None = None) -> Doc:
    if not ref.strip():
        option = "--model" if kind == "models" else "--deploy"
        raise InputError(f"{option} is empty: give a {kind[:-1]} preset name or a file path")
    looks_like_path = any(ch in ref for ch in "/\\") or ref.endswith((".yaml", ".yml", ".json"))
    if not looks_like_path and canonical_preset(ref) not in preset_names(kind):
        try:
            looks_like_path = Path(ref).exists()  # a snapshot folder or file in the working directory
        except OSError:
            looks_like_path = False
    if looks_like_path:
        path = Path(ref)
        if base is not None and not path.is_absolute():
            path = base / path
        return read_file(path)
    return _preset_doc(kind, ref)


def _check_schema(r: Reader, *, required: bool = True) -> None:
    version = r.get_int("schema_version", required=required, default=SCHEMA_VERSION)
    if version > SCHEMA_VERSION:
        r.fail("schema_version", f"this file needs a newer kvplan (schema {version} > {SCHEMA_VERSION})")


# --------------------------------------------------------------------------- models

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
}  # fmt: skip

MLA_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                     "GlmMoeDsaForCausalLM")  # fmt: skip
"""MLA models (DSA when the config has an indexer): DeepSeek-V2/V3/R1, Kimi-K2, DeepSeek-V3.2, GLM-5.x."""
FULL_ATTENTION_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
                                "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Glm4MoeForCausalLM",
                                "DeciLMForCausalLM")  # fmt: skip
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
    doc = _with_modelopt_quantization(_resolve("models", ref))
    r = Reader(doc)
    if doc.source.endswith(".json") or "config" not in r.data:
        if not doc.source.endswith(".json"):
            r.fail("config", "missing: a model YAML has a 'config' section of Hugging Face fields")
        stem = Path(doc.source).parent.name or Path(doc.source).stem
        arch = replace(
            _model_from_hf(r, name=stem, source=doc.source, strict=False, checkpoint_dtype=None),
            config_rope=config_rope(r.data),
        )

        return with_checkpoint(arch, doc.source, r.data)
    _check_schema(r)
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
        arch, measured_weights=tuple(points), documented_rope_scaling=rope, config_rope=config_rope(r.data["config"])
    )
    return preset_weights(arch, doc.source, r.data["config"], dtype)


MODELOPT_QUANT_FILE = "hf_quant_config.json"
"""NVIDIA ModelOpt checkpoints (FP8, NVFP4) keep their quantization beside config.json, not in it."""


def _with_modelopt_quantization(doc: Doc) -> Doc:
    """A config.json without ``quantization_config`` next to ModelOpt's ``hf_quant_config.json``: that file is the
    checkpoint's quantization, as the engines read it (vLLM ``ModelConfig._parse_quant_hf_config`` falls back to
    ``hf_quant_config.json``; SGLang ``ModelConfig._parse_modelopt_quant_config``). Without it an NVFP4 checkpoint
    would be planned as bf16: nvidia/DeepSeek-V3.2-NVFP4 at tp 8 is 48.83 GiB a GPU, not 160 GiB
    (tests/unit/test_weights_published.py). Read with the same limits and strict JSON as config.json."""
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
    architecture = _architecture(r)
    if architecture == "Glm5NextForConditionalGeneration" and r.has("text_config"):
        r = r.sub("text_config")  # GLM-5.3-Flash: the decoder's fields (SGLang Glm5NextConfig.text_config)
    if architecture == "KimiK3ForConditionalGeneration" and r.has("text_config"):
        # Kimi-K3: a KimiLinearForCausalLM text_config beside a vision tower (SGLang KimiK3Config.text_config,
        # models/kimi_k3.py KimiK3LinearForCausalLM(config.text_config)); its caches are Kimi-Linear's
        r, architecture = r.sub("text_config"), "KimiLinearForCausalLM"
    if architecture in QWEN3_5_ARCHITECTURES and r.has("text_config"):
        r = r.sub("text_config")  # Qwen3.5 / 3.6 / 3.8 dense: the decoder's fields (kvplan.models.hybrid)
    num_layers = r.get_int("num_hidden_layers", required=True, maximum=limits.MAX_LAYERS)
    validate.check_config(r, num_layers)
    supported = (*MLA_ARCHITECTURES, *FULL_ATTENTION_ARCHITECTURES, *HYBRID_ARCHITECTURES, *QWEN3_5_ARCHITECTURES)
    if architecture != "unknown" and architecture not in supported:
        r.fail("architectures", f"{architecture} is not a model kvplan plans; supported: {', '.join(supported)}")
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
    index_topk = r.get_int("index_topk", default=0, minimum=0, maximum=limits.MAX_TOKENS)
    index_head_dim = r.get_int("index_head_dim", default=128 if index_topk else 0, maximum=limits.MAX_DIM)
    flags: tuple[bool, ...] = ()
    rule = IndexerRule.NONE
    pattern = r.get_str("index_topk_pattern")
    freq = r.get_int("index_topk_freq", default=1, maximum=limits.MAX_LAYERS)
    offset = r.get_int("index_skip_topk_offset", default=None, minimum=0, maximum=limits.MAX_LAYERS)
    if index_topk:
        types = r.get_str_list("indexer_types", ("full", "shared"))
        if types is not None and len(types) != num_layers:
            r.fail("indexer_types", f"has {len(types)} entries for {num_layers} layers")
        if types is None and pattern is not None and (len(pattern) != num_layers or set(pattern) - {"F", "S"}):
            r.fail("index_topk_pattern", f"expected {num_layers} letters F or S")
        flags, rule = full_indexer_layers(
            num_layers,
            indexer_types=types,
            pattern=pattern,
            freq=freq,
            offset=offset,
        )
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
            index_n_heads=r.get_int("index_n_heads", default=0, minimum=0, maximum=limits.MAX_DIM),
            index_head_dim=index_head_dim,
            first_k_dense_replace=r.get_int("first_k_dense_replace", default=0, minimum=0, maximum=limits.MAX_DIM),
            intermediate_size=r.get_int("intermediate_size", default=0, minimum=0, maximum=limits.MAX_DIM),
            n_routed_experts=r.get_int("n_routed_experts", default=0, minimum=0, maximum=limits.MAX_DIM),
            n_shared_experts=r.get_int("n_shared_experts", default=0, minimum=0, maximum=limits.MAX_DIM),
            moe_intermediate_size=r.get_int("moe_intermediate_size", default=0, minimum=0, maximum=limits.MAX_DIM),
            vocab_size=r.get_int("vocab_size", default=0, maximum=limits.MAX_DIM),
            tie_word_embeddings=r.get_bool("tie_word_embeddings", default=False),
        )
        if explicit_dtype or index_topk:  # a preset, or DSA: one checkpoint dtype (the DSA goldens' groups)
            groups, assumptions = param_groups(shape, checkpoint_dtype=checkpoint_dtype), said
        else:  # plain MLA config.json: every module in the scheme its quantization_config gives it
            w = param_groups_from_hf(r.data, source, fail=r.fail, mla=shape)
            groups, summary, assumptions = w.groups, w.summary, w.assumptions
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
        index_head_dim=index_head_dim,
        index_n_heads=r.get_int("index_n_heads", default=0, minimum=0, maximum=limits.MAX_DIM),
        index_topk=index_topk,
        index_kpool=r.get_int("index_kpool", default=1, maximum=limits.MAX_DIM),
        indexer_full=flags,
        indexer_rule=rule,
        index_topk_freq=freq,
        index_skip_topk_offset=offset,
        index_topk_pattern=pattern,
        param_groups=groups,
        weights_summary=summary,
        weights_assumptions=assumptions,
        activation=activation_dims(r.data),
        shards=shard_dims(r.data, source),
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
    hidden = r.get_int("hidden_size", default=0, minimum=0, maximum=limits.MAX_DIM)
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


# --------------------------------------------------------------------------- GPUs

_GPU_KEYS = {
    "name", "nvml_total", "cuda_total", "sm", "gfx", "vendor", "hbm_bandwidth_per_s", "source", "aliases", "derived",
}  # fmt: skip
_GPU_DERIVABLE = ("nvml_total", "cuda_total")
_GPU_VENDOR_WORDS = ("nvidia", "amd", "geforce", "instinct", "radeon")
"""Words a GPU name may start with that name no model: ``NVIDIA GeForce RTX 4090`` is ``rtx-4090``."""
DERIVED_CUDA_RESERVE_BYTES = 512 * MiB
"""An NVIDIA GPU's CUDA total, where no public torch / cudaMemGetInfo figure was found (and for a custom GPU): its
NVML total less this, inside the 325-870 MiB driver reserves measured on H100, H200, B200, GB200 and A100
(reference C.1). ROCm reports the VRAM total itself. `kvplan probe` measures the real figure."""
GPU_SPEC_KNOBS = ("gpu_memory", "gpu_sm")
"""--set / YAML keys that describe a custom GPU together with ``gpu: custom`` (its NVML total and compute
capability); a deployment may instead give ``gpu`` as a mapping of gpus.yaml's keys."""


def _gpu_key(name: str) -> str:
    """How GPU names are compared: case-insensitive, spaces and underscores as dashes, a leading vendor or brand
    word (NVIDIA, AMD, GeForce, Instinct, Radeon) dropped."""
    words = name.strip().lower().replace("_", " ").replace("-", " ").split()
    while len(words) > 1 and words[0] in _GPU_VENDOR_WORDS:
        words = words[1:]
    return "-".join(words)


@lru_cache(maxsize=1)
def _gpu_table() -> tuple[dict[str, Gpu], dict[str, str]]:
    """The catalog, and every spelling (key, alias, marketing name) -> catalog key; one spelling names one GPU."""
    doc = parse_text((_configs() / "gpus.yaml").read_text(encoding="utf-8"), "gpus.yaml (built-in)")
    r = Reader(doc)
    _check_schema(r)
    gpus = r.sub("gpus")
    catalog = {str(key): _gpu(gpus.sub(key), str(key)) for key in gpus.data}
    spellings: dict[str, str] = {}
    for key, gpu in catalog.items():
        for spelling in (key, gpu.name, *gpu.aliases):
            other = spellings.setdefault(_gpu_key(spelling), key)
            if other != key:
                gpus.sub(key).fail("aliases", f"{spelling!r} already names {other}: a spelling names one GPU")
    return catalog, spellings


def gpu_catalog() -> dict[str, Gpu]:
    return _gpu_table()[0]


def _gpu(r: Reader, key: str) -> Gpu:
    """A GPU from a gpus.yaml entry or a deployment's ``gpu:`` mapping; a missing cuda_total is derived."""
    r.reject_unknown(_GPU_KEYS)
    vendor = r.get_choice("vendor", ("nvidia", "amd"), default="nvidia")
    nvml_total = r.get_bytes("nvml_total", required=True, minimum=limits.MIN_GPU_BYTES, maximum=limits.MAX_GPU_BYTES)
    derived = set(r.get_str_list("derived", _GPU_DERIVABLE) or ())
    if not r.has("cuda_total"):
        derived.add("cuda_total")
    reserve = 0 if vendor == "amd" else DERIVED_CUDA_RESERVE_BYTES
    aliases = r.data.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str | int) for a in aliases):
        r.fail("aliases", f"expected a list of names, got {_kind(aliases)}")
    gpu = Gpu(
        key=key,
        name=r.get_str("name", required=True),
        nvml_total_bytes=nvml_total,
        cuda_total_bytes=r.get_bytes(
            "cuda_total",
            default=max(nvml_total - reserve, limits.MIN_GPU_BYTES),
            minimum=limits.MIN_GPU_BYTES,
            maximum=limits.MAX_GPU_BYTES,
        ),
        sm=r.get_int("sm", default=0, minimum=0, maximum=1000),
        gfx=r.get_str("gfx", default=""),
        vendor=vendor,
        hbm_bandwidth_bytes_per_s=r.get_bytes("hbm_bandwidth_per_s", default=0, minimum=0, maximum=1 << 60),
        source=r.get_str("source", default=""),
        aliases=tuple(str(a) for a in aliases),
        derived=tuple(d for d in _GPU_DERIVABLE if d in derived),
    )
    if gpu.sm and gpu.gfx:  # one vendor's architecture: an SM (NVIDIA) or a gfx target (AMD), never both
        r.fail("gfx", f"{gpu.gfx!r} beside sm {gpu.sm}: give sm for an NVIDIA GPU or gfx for an AMD one")
    if gpu.cuda_total_bytes > gpu.nvml_total_bytes:
        r.fail(
            "cuda_total",
            f"{gpu.cuda_total_bytes:,} B is above nvml_total ({gpu.nvml_total_bytes:,} B): CUDA reports NVML's total"
            " less the driver reserve, never more",
        )
    return gpu


def close_gpus(name: str, n: int = 3) -> list[str]:
    """Catalog keys whose spellings are closest to name (difflib), best first."""
    spellings = _gpu_table()[1]
    wanted = _gpu_key(name)
    close = difflib.get_close_matches(wanted, list(spellings), n=4 * n, cutoff=0.5)
    close += [s for s in spellings if wanted and (wanted in s or s in wanted.split("-"))]
    return list(dict.fromkeys(spellings[s] for s in close))[:n]


def find_gpu(name: str) -> Gpu:
    """A catalog GPU by key, alias or name, case-insensitively: ``H100`` is h100-sxm, ``NVIDIA H20`` is h20,
    ``4090`` is rtx-4090, ``MI300`` is mi300x."""
    catalog, spellings = _gpu_table()
    key = spellings.get(_gpu_key(name))
    if key is not None:
        return catalog[key]
    close = close_gpus(name)
    hint = f"closest: {', '.join(close)}" if close else f"{len(catalog)} are listed by `kvplan gpus`"
    raise InputError(
        f"unknown GPU {_show(name)} ({hint}); for another GPU: --set gpu=custom --set gpu_memory=...GiB"
        " (its NVML total) [--set gpu_sm=90], or a gpu: mapping in the deployment"
    )


def _custom_gpu(values: dict[str, Any], blame: Callable[..., Reader]) -> None:
    """``gpu: custom`` with ``gpu_memory`` (and ``gpu_sm``) becomes a Gpu, through the same path as a gpu mapping."""
    spec = {k: values.pop(k) for k in GPU_SPEC_KNOBS if k in values}
    if values.get("gpu") != "custom":
        if spec:
            knob = next(iter(spec))
            gpu = values.get("gpu")
            what = f"the catalog's {gpu.name} has its own" if isinstance(gpu, Gpu) else "the catalog GPUs have their"
            blame(knob).fail(knob, f"{knob} describes a custom GPU: add gpu=custom ({what} memory and SM)")
        return
    if "gpu_memory" not in spec:
        blame("gpu").fail(
            "gpu", "gpu=custom needs gpu_memory=...GiB (the NVML total, e.g. 96GiB); optional gpu_sm=90 (the default)"
        )
    sm = spec.get("gpu_sm", 90)
    memory = spec["gpu_memory"]
    mapping = {
        "name": "custom GPU",
        "nvml_total": f"{memory}B",
        "sm": sm,
        "source": f"gpu=custom: gpu_memory {memory:,} B ({memory / GiB:.2f} GiB) as the NVML total, SM {sm}"
        + ("" if "gpu_sm" in spec else " (kvplan's default: Hopper)"),
    }
    values["gpu"] = _gpu(Reader(Doc(mapping, blame("gpu_memory").doc.source)), "custom")


# --------------------------------------------------------------------------- deployments

ALIASES = {
    "tensor_parallel_size": "tp", "tp_size": "tp", "dcp_size": "dcp",
    "decode_context_parallel_size": "dcp", "dp": "dp_attention", "dp_size": "dp_attention",
    "ep_size": "ep", "pp_size": "pp", "pipeline_parallel_size": "pp", "max_model_len": "context_length",
    "block_size": "page_size", "max_num_seqs": "max_running_requests", "kv_cache_memory_bytes": "kv_cache_memory",
    "num_speculative_tokens": "speculative_num_draft_tokens", "version": "engine_version",
    "enforce_eager": "disable_cuda_graph", "sglang_swa_eviction_interval": "swa_eviction_interval",
    "vllm_pp_layer_partition": "pp_layer_partition", "sglang_pp_layer_partition": "pp_layer_partition",
    "sglang_allow_overwrite_longer_context_len": "allow_long_context",
    "vllm_allow_long_max_model_len": "allow_long_context",
}  # fmt: skip
"""The engines' own spellings (SGLang and vLLM flags, with dashes or underscores) -> kvplan's knob names."""
_DEPLOY_META = {"schema_version", "name", "description", "requirements"}
_GPU_COUNTS = ("gpus_per_node", "nodes", "tp", "dp_attention", "ep", "pp", "dcp")
_TOKEN_KNOBS = ("page_size", "chunked_prefill_size", "context_length", "max_num_batched_tokens", "max_total_tokens")
_MEMORY_KNOBS = ("kv_cache_memory", "weights_per_gpu", "pre_load_free", "runtime_overhead")
DEFAULT_ENGINE = "sglang"
DEFAULT_GPU = "h200"
DEFAULT_GPUS_PER_NODE = 8


def canonical_key(key: str, *, abbrev: bool = False) -> str:
    """A knob name as kvplan spells it: '--tensor-parallel-size' and 'max_model_len' are 'tp' and 'context_length';
    with ``abbrev`` (a command line's --set), an engine flag's unique prefix too, as argparse takes '--mem-frac'."""
    k = key.strip().lstrip("-").replace("-", "_").lower()
    if k in ALIASES or k in KNOBS or k in GPU_SPEC_KNOBS:
        return ALIASES.get(k, k)
    return spellings().get(k) or (knob_for_prefix(k) if abbrev else None) or k  # the engines' flags, any version


def _knobs_list() -> str:
    return ", ".join((*KNOBS, *GPU_SPEC_KNOBS))


def _knob_values(r: Reader, *, override: bool = False) -> Iterator[tuple[str, Any]]:
    """Each knob present in r, converted and checked."""
    for key in r.data:
        if key in _DEPLOY_META:
            if override:
                r.fail(key, f"{key} is not a deployment knob; --set changes knobs only ({_knobs_list()})")
            continue
        if r.data[key] is None:
            continue
        if key in _GPU_COUNTS:
            yield key, r.get_int(key, maximum=limits.MAX_GPUS)
        elif key == "context_length" and str(r.data[key]).strip().lower() in ("-1", "auto"):
            yield key, AUTO_FIT  # vLLM --max-model-len -1 / auto: fitted to the KV cache memory
        elif key in _TOKEN_KNOBS:
            yield key, r.get_tokens(key)
        elif key in ("max_running_requests", "cuda_graph_max_bs", "max_mamba_cache_size", "num_gpu_blocks_override"):
            yield key, r.get_int(key)
        elif key == "speculative_eagle_topk":
            yield key, r.get_int(key, maximum=limits.MAX_DIM)
        elif key in _MEMORY_KNOBS:  # vLLM takes any positive --kv-cache-memory-bytes
            yield key, r.get_bytes(key, minimum=1 if key == "kv_cache_memory" else limits.MIN_MEMORY_KNOB_BYTES)
        elif key == "non_kv_other":
            yield key, r.get_bytes(key, minimum=0)
        elif key in ("mem_fraction_static", "gpu_memory_utilization", "swa_full_tokens_ratio"):
            yield key, r.get_fraction(key)
        elif key == "speculative_num_draft_tokens":
            yield key, r.get_int(key, minimum=0, maximum=limits.MAX_DIM)
        elif key in (
            "disable_cuda_graph",
            "disable_radix_cache",
            "async_scheduling",
            "disable_hybrid_kv_cache_manager",
            "allow_long_context",
        ):
            yield key, r.get_bool(key)
        elif key == "swa_eviction_interval":
            yield key, r.get_int(key, maximum=limits.MAX_TOKENS)
        elif key == "dtype":
            yield key, r.get_choice(key, MODEL_DTYPES)
        elif key == "pp_layer_partition":
            yield key, r._get(key, parse_layer_partition, False, None)
        elif key == "rope_scaling":
            yield key, r.get_choice(key, ROPE_TYPES)
        elif key == "quantization":
            yield key, r.get_choice(key, QUANTIZATIONS)
        elif key == "engine":
            yield key, r.get_choice(key, tuple(ENGINES))
        elif key == "kv_cache_dtype":
            yield key, r.get_choice(key, KV_CACHE_DTYPES)
        elif key == "mla_layout":
            yield key, r.get_choice(key, tuple(m.value for m in MlaLayout))
        elif key == "gpu":
            if isinstance(r.data[key], dict):
                yield key, _gpu(r.sub(key), "custom")
            else:
                value = r.data[key]
                name = str(value) if isinstance(value, int) and not isinstance(value, bool) else r.get_str(key)
                if _gpu_key(name) == "custom":
                    yield key, "custom"  # with gpu_memory (and gpu_sm): _custom_gpu
                    continue
                try:
                    yield key, find_gpu(name)
                except InputError as e:
                    r.fail(key, str(e))
        elif key == "gpu_memory":
            yield key, r.get_bytes(key, minimum=limits.MIN_GPU_BYTES)
        elif key == "gpu_sm":
            yield key, r.get_int(key, minimum=0, maximum=1000)
        elif key in ("model", "engine_version", "attention_backend"):
            value = r.data[key]
            if isinstance(value, int | float) and not isinstance(value, bool) and key == "engine_version":
                r.fail(key, f'write the version as a string, e.g. engine_version: "{value}" (YAML read {value!r})')
            yield key, str(r.get_str(key))
        else:
            r.fail(key, f"unknown key{nearest_knob(key, (*KNOBS, *GPU_SPEC_KNOBS))}; the knobs are: {_knobs_list()}")


def _normalized(doc: Doc) -> Doc:
    """The top-level keys under kvplan's knob names (engine spellings accepted), lines kept."""
    if not isinstance(doc.data, dict):
        return doc
    data: dict[str, Any] = {}
    origin: dict[str, str] = {}
    lines = dict(doc.lines)
    for key, value in doc.data.items():
        name = canonical_key(str(key)) if str(key) not in _DEPLOY_META else str(key)
        if name in data:
            raise ConfigError(
                f"given twice: as {origin[name]!r} (line {doc.line((origin[name],))}) and as {key!r}",
                source=doc.source,
                key=name,
                line=doc.line((key,)),
            )
        data[name] = value
        origin[name] = str(key)
        if name != key:
            for path, line in doc.lines.items():
                if path[:1] == (key,):
                    lines[(name, *path[1:])] = line
    return Doc(data, doc.source, lines, doc.strict)


def parse_set(items: list[str] | tuple[str, ...]) -> Doc:
    """`--set key=value` items as a Doc whose source is '--set'."""
    data: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InputError(f"--set {_show(item)}: expected KEY=VALUE, e.g. --set dcp=8 (knobs: {_knobs_list()})")
        raw_key, value = (s.strip() for s in item.split("=", 1))
        key = canonical_key(raw_key, abbrev=True)
        if not value:
            raise InputError(f"--set {_show(item)}: empty value")
        if key in data:
            raise InputError(f"--set {key} given twice")
        try:
            data[key] = _scalar(value)
        except InputError as e:
            raise type(e)(f"--set: {key}: {e}") from None
    return Doc(data, "--set")


def _scalar(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "default"):
        return None
    if re.fullmatch(r"[+-]?\d+(?:_\d+)*", text):
        return limits.int_text(text, name="value")
    return text  # fractions, sizes and versions ('0.5.23', '0.1') stay text for the typed readers


def _engine_name(engine: str) -> str:
    return {"sglang": "SGLang", "vllm": "vLLM"}.get(engine, engine)


def _check_engine_knobs(values: dict[str, Any], engine: str, blame: Callable[..., Reader]) -> None:
    """A knob only the other engine reads is an error naming this engine's own knob (one table: ENGINE_KNOBS)."""
    for knob, (owner, instead) in ENGINE_KNOBS.items():
        if knob in values and owner != engine:
            own, other = _engine_name(owner), _engine_name(engine)
            article = "an" if own[0] in "SAEIOU" else "a"
            what = f"{other}'s is {instead}" if instead in KNOBS else f"{other} has none ({instead})"
            blame(knob).fail(knob, f"{knob} is {article} {own} knob; {what}")
    if values.get("context_length") == AUTO_FIT and engine != "vllm":
        blame("context_length").fail("context_length", "-1 (auto-fit to the KV cache memory) is vLLM's; give a length")


def load_deployment(ref: str | None, sets: list[str] | tuple[str, ...] = ()) -> Deployment:
    """A deployment preset or YAML file, with `--set` overrides applied on top.

    Only ``model`` is required; the rest is defaulted and the defaults are recorded on the Deployment
    (``defaulted``) so that the output says which values kvplan chose.
    """
    doc = _normalized(_resolve("deployments", ref if ref is not None else DEFAULT_DEPLOYMENT))
    r = Reader(doc)
    defaulted: list[tuple[str, str, str]] = []
    if not r.has("schema_version"):
        defaulted.append(("schema_version", str(SCHEMA_VERSION), "the current schema"))
    _check_schema(r, required=False)
    values = dict(_knob_values(r))
    written_for = str(values.get("model", ""))
    override = Reader(parse_set(sets))
    overridden = dict(_knob_values(override, override=True))
    cleared = {k for k, v in override.data.items() if v is None}
    values.update(overridden)
    for k in cleared:
        values.pop(k, None)

    def blame(*keys: str) -> Reader:
        return override if any(k in override.data for k in keys) else r

    def default(knob: str, value: Any, shown: str, why: str) -> None:
        values[knob] = value
        defaulted.append((knob, shown, why))

    if "model" not in values:
        r.fail("model", "missing (required): the model served, a preset such as glm-5.3 or a model file")
    if "engine" not in values:
        default("engine", DEFAULT_ENGINE, DEFAULT_ENGINE, "kvplan's default engine")
    engine = values["engine"]
    if "engine" in overridden and "engine_version" not in overridden:
        values["engine_version"] = ENGINES[engine][0]  # switching engines takes the new engine's semantics
    if "engine_version" not in values:
        default("engine_version", ENGINES[engine][0], ENGINES[engine][0], "the newest version kvplan models")
    version = values["engine_version"]
    try:
        rules_for(engine, version)  # any version: the rules in force then
    except InputError as e:
        where = override if "engine_version" in overridden or "engine" in overridden else r
        where.fail("engine_version", str(e).removeprefix(f"engine_version {version}: "))
    _check_engine_knobs(values, engine, blame)
    _custom_gpu(values, blame)
    if "gpu" not in values:
        default("gpu", find_gpu(DEFAULT_GPU), DEFAULT_GPU, "kvplan's default GPU")
    if "gpus_per_node" not in values:
        default("gpus_per_node", DEFAULT_GPUS_PER_NODE, str(DEFAULT_GPUS_PER_NODE), "one 8-GPU node")
    if "nodes" not in values:
        default("nodes", 1, "1", "one node")
    gpus = values["gpus_per_node"] * values["nodes"]
    if gpus > limits.MAX_GPUS:
        blame("nodes", "gpus_per_node").fail(
            "nodes", f"{values['nodes']:,} nodes × {values['gpus_per_node']:,} GPUs is past kvplan's limit of"
            f" {limits.MAX_GPUS:,} GPUs"
        )  # fmt: skip
    if "tp" not in values:
        tp = max(gpus // values.get("pp", 1), 1)
        default(
            "tp",
            tp,
            str(tp),
            f"all {gpus} GPUs / pp {values.get('pp', 1)} ({_engine_name(engine)}'s own default is 1, which no"
            " large model fits)",
        )
    switched = {"engine_version"} if "engine" in overridden else set()  # the new engine's version, not the file's
    dep = Deployment(
        name=r.get_str("name", default=Path(doc.source).stem) + (" (+ --set)" if sets else ""),
        source=doc.source,
        description=r.get_str("description", default=""),
        explicit=frozenset(values) - {"model", "engine", "gpu"} - {d[0] for d in defaulted},
        defaulted=tuple(defaulted),
        written_for=written_for,
        from_file=(frozenset(r.data) & frozenset(values)) - frozenset(override.data) - {"model"} - switched,
        **values,
    )
    _check_layout(dep, r, override)
    _check_memory(dep, blame)
    return dep


def _check_layout(d: Deployment, file: Reader, override: Reader) -> None:
    """Cross-knob rules, blamed on --set when --set gave one of the knobs involved, else on the file."""

    def blame(*keys: str) -> Reader:
        return override if any(k in override.data for k in keys) else file

    if d.tp % d.dcp:
        blame("dcp", "tp").fail("dcp", f"dcp {d.dcp} must divide tp {d.tp}")
    if d.tp % d.dp_attention:
        blame("dp_attention", "tp").fail("dp_attention", f"dp_attention {d.dp_attention} must divide tp {d.tp}")
    if d.pp_layer_partition is not None and len(d.pp_layer_partition) != d.pp:
        blame("pp_layer_partition", "pp").fail(
            "pp_layer_partition", f"{len(d.pp_layer_partition)} stages given for pp {d.pp} (one entry per stage)"
        )
    _check_gpu_count(d, blame)


def _check_gpu_count(d: Deployment, blame: Callable[..., Reader]) -> None:
    """The one GPU-count rule: the layout's ranks, max(tp, ep) × pp (dp-attention and dcp split tp), fit on
    nodes × gpus_per_node; if not, the message names the node count that would hold them."""
    width, knob = (d.ep, "ep") if d.ep > d.tp else (d.tp, "tp")
    needed = width * d.pp
    have = d.nodes * d.gpus_per_node
    if needed <= have:
        return
    nodes = -(-needed // d.gpus_per_node)
    blame(knob, "pp", "nodes", "gpus_per_node").fail(
        knob,
        f"{knob} {width} × pp {d.pp} needs {needed} GPUs, and {d.nodes} node(s) × {d.gpus_per_node} GPUs hold {have}:"
        f" add nodes={nodes} (--set nodes={nodes}) for {nodes} × {d.gpus_per_node} GPUs, or give gpus_per_node",
    )


def _check_memory(d: Deployment, blame: Callable[..., Reader]) -> None:
    """A GPU cannot hold more than its memory: every per-GPU byte knob is at most the GPU's NVML total."""
    total = d.gpu.nvml_total_bytes
    for knob in (*_MEMORY_KNOBS, "non_kv_other"):
        value = getattr(d, knob)
        if value is not None and value > total:
            blame(knob, "gpu").fail(
                knob,
                f"{value:,} B is more than the whole GPU ({d.gpu.name}: {total:,} B = {total // MiB:,} MiB NVML total)",
            )


def load_requirements(ref: str) -> Requirements:
    """The `requirements:` section of a deployment file (empty when there is none)."""
    r = Reader(_resolve("deployments", ref))
    if not r.has("requirements"):
        return Requirements()
    q = r.sub("requirements")
    q.reject_unknown({"ctx", "concurrency", "max_capacity_drop"})
    concurrency: list[tuple[int, int]] = []
    if q.has("concurrency"):
        items = q.data["concurrency"]
        if not isinstance(items, list):
            items = [items]
        for i, item in enumerate(items):
            try:
                concurrency.append(parse_concurrency(str(item)))
            except InputError as e:
                q.fail(("concurrency", i), str(e))
    return Requirements(
        min_ctx_tokens=q.get_tokens("ctx"),
        concurrency=tuple(concurrency),
        max_capacity_drop_ppm=q._get("max_capacity_drop", lambda v: parse_percent_ppm(str(v)), False, None),
    )


def deployment_model_ref(d: Deployment) -> str:
    """The model reference of a deployment, relative paths taken from the deployment file's folder."""
    if d.source.endswith("(built-in)") or not any(c in d.model for c in "/\\"):
        return d.model
    path = Path(d.model)
    return str(path if path.is_absolute() else Path(d.source).parent / path)


def check_model_for_deployment(arch: ModelArch, dep: Deployment) -> None:
    """Rules that need both the model and the deployment, applied where a user's plan is loaded.

    - weights: a model with no parameter groups (a config.json without ``hidden_size``) and no measured point
      cannot be planned unless ``weights_per_gpu`` is given (kvplan would otherwise plan 0 B of weights);
    - ``weights_per_gpu`` under limits.MIN_WEIGHTS_PPM (1 %) of the model's own estimate is a unit slip.
    """
    validate.refuse_unplanned(arch, dep)  # before the weights: a layout kvplan cannot plan is the one line that matters
    split = Split.of(tp=dep.tp, dp_attention=dep.dp_attention, ep=dep.ep, pp=dep.pp)
    if dep.weights_per_gpu is None and arch.measured_weights_for(split) is not None:
        return  # a measured point: no estimate to check (a preset's tensors are then never laid out)
    estimate = arch.estimated_weights_per_gpu(split, with_mtp=dep.mtp)
    if dep.weights_per_gpu is not None:
        if estimate > 0 and dep.weights_per_gpu * 1_000_000 < estimate * limits.MIN_WEIGHTS_PPM:
            raise InputError(
                f"weights_per_gpu {dep.weights_per_gpu:,} B is under 1 % of the {estimate:,} B that {arch.name}'s"
                f" parameters take split {split}: a unit slip? (kvplan refuses weights below 1 % of its estimate)"
            )
        return
    if estimate <= 0:
        raise InputError(
            f"model {arch.name} ({arch.source}): no weights to plan with (the config has no hidden_size or leaves"
            " the MLP out, so kvplan cannot count the parameters): give --set weights_per_gpu=...GiB, e.g. from the"
            " engine log"
        )

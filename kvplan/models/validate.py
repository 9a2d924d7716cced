"""A model config's values checked once, where the config is read, before any family reads them.

Every count or size an engine divides or allocates by is an integer >= 1 when given (a zero head count, expert
count or width would build a zero-sized tensor or divide by zero in the engine; kvplan refuses it rather than
plan it); the few that may be 0 by design (NoPE rope width, shared experts, dense layers, MTP layers) >= 0.
Per-layer lists hold exactly one known word a layer; booleans are JSON booleans (``"yes"`` is a string);
the ``quantization_config`` is read (its ``re:`` patterns compiled) even where the parameters are not counted.
Each refusal is a ConfigError naming the file and the key (exit 2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan import limits
from kvplan.errors import InputError
from kvplan.models import quant

if TYPE_CHECKING:
    from kvplan.models.arch import ModelArch
    from kvplan.models.deploy import Deployment
    from kvplan.models.reader import Reader

POSITIVE = (
    "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
    "moe_intermediate_size", "routed_expert_hidden_size", "vocab_size",
    "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "num_experts_per_token",
    "n_group", "topk_group", "moe_layer_freq", "decoder_sparse_step", "kv_lora_rank", "q_lora_rank",
    "qk_nope_head_dim", "v_head_dim", "index_head_dim", "index_n_heads", "index_kpool", "index_topk_freq",
    "full_attention_interval", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
    "linear_value_head_dim", "linear_conv_kernel_dim", "o_lora_rank", "o_groups", "hc_mult",
    "attn_res_block_size",
)  # fmt: skip
"""Counts and widths >= 1 (up to limits.MAX_DIM) when present and not null: heads (vLLM ``ModelConfig
.get_num_kv_heads`` divides by them), MLP and expert widths (split over tp), expert counts (split over ep)."""

NON_NEGATIVE = ("qk_rope_head_dim", "n_shared_experts", "num_shared_experts", "first_k_dense_replace",
                "num_nextn_predict_layers", "index_skip_topk_offset", "num_hash_layers")  # fmt: skip
"""May be 0 by design: Kimi-Linear / GLM-5.3-Flash MLA without rope, no shared experts, no dense or MTP layers."""

WIDTHS_MAY_BE_ZERO = ("shared_expert_intermediate_size",)
"""Widths where 0 means 'none': vLLM and SGLang qwen2_moe.py / qwen3_next.py build the shared expert only
``if config.shared_expert_intermediate_size > 0`` (Qwen3-Coder-30B-A3B's config carries 0)."""

TOKENS = ("index_topk", "sliding_window")
"""Token counts >= 1 when given: a DSA model keeps ``index_topk`` tokens (SGLang ``is_deepseek_nsa`` needs only
the key to be present, so 0 is not 'no indexer'); a window of 0 tokens holds nothing."""

BOOLEANS = ("tie_word_embeddings", "use_sliding_window", "attention_bias", "mlp_bias", "mla_use_nope",
            "mla_use_output_gate", "attn_output_gate", "latent_moe_use_norm", "norm_topk_prob",
            "use_qk_norm")  # fmt: skip

LAYER_WORDS = {
    # transformers configuration_utils ALLOWED_LAYER_TYPES, plus GLM-5.3-Flash's DSA layers (SGLang
    # Glm5NextTextConfig); the families that read the list narrow it further (kvplan.models.hybrid)
    "layer_types": (
        "full_attention",
        "sliding_attention",
        "chunked_attention",
        "linear_attention",
        "deepseek_sparse_attention",
    ),
    "mlp_layer_types": ("dense", "sparse"),  # GLM-5.x config.json: one per decoder layer
}


def check_config(r: Reader, num_layers: int) -> None:
    """Refuse, naming the key, a value no engine could build (see the module doc); a valid config passes as is."""
    check_fields(r)
    for key, words in LAYER_WORDS.items():
        types = r.get_str_list(key, words)
        if types is not None and len(types) != num_layers:
            r.fail(key, f"has {len(types)} entries for {num_layers} layers (num_hidden_layers)")
    _layer_numbers(r, "mlp_only_layers", num_layers)
    if r.has("quantization_config"):  # compiled at read time, whether or not the weights are counted
        quant.resolve(r.data, r.doc.source, fail=r.fail)


def check_fields(r: Reader) -> None:
    """The checks of single fields, for a config and for a wrapper around its ``text_config`` (a VLM's top level
    is read too, so it is checked too)."""
    for key in POSITIVE:
        r.get_int(key, minimum=1, maximum=limits.MAX_DIM)
    for key in NON_NEGATIVE:
        r.get_int(key, minimum=0, maximum=limits.MAX_LAYERS if key != "qk_rope_head_dim" else limits.MAX_DIM)
    for key in WIDTHS_MAY_BE_ZERO:
        r.get_int(key, minimum=0, maximum=limits.MAX_DIM)
    for key in TOKENS:
        r.get_int(key, minimum=1, maximum=limits.MAX_TOKENS)
    for key in BOOLEANS:
        if r.has(key) and not isinstance(r.data[key], bool):
            r.fail(key, f"expected true or false, got {_show(r.data[key])}")


def _layer_numbers(r: Reader, key: str, num_layers: int) -> None:
    """A list of 0-based layer numbers (Qwen3-MoE ``mlp_only_layers``: vLLM ``Qwen3MoeDecoderLayer`` tests
    ``layer_idx not in config.mlp_only_layers``): a number past the layers would be a silent no-op."""
    value = r.data.get(key)
    if value is None:
        return
    if not isinstance(value, list):
        r.fail(key, f"expected a list of layer numbers, got {_show(value)}")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < num_layers:
            r.fail((key, i), f"expected a layer number from 0 to {num_layers - 1}, got {_show(v)}")


def compress_ratios(r: Reader, num_layers: int) -> list[int]:
    """DeepSeek-V4's ``compress_ratios``: one per decoder layer and one per MTP layer (vLLM
    ``DeepseekV4MultiHeadLatentAttentionWrapper`` reads ``compress_ratios[layer_id]``, the MTP layers after the
    decoder's), each 0 (window only), 4 (CSA + indexer) or 128 (HCA); 1 is read as 0, as before."""
    mtp = r.get_int("num_nextn_predict_layers", default=0, minimum=0, maximum=limits.MAX_LAYERS)
    ratios = r.data.get("compress_ratios")
    want = num_layers + mtp
    if not isinstance(ratios, list) or len(ratios) != want:
        got = f"{len(ratios)} entries" if isinstance(ratios, list) else _show(ratios)
        r.fail("compress_ratios", f"expected {want} ratios ({num_layers} layers + {mtp} MTP), got {got}")
    for i, v in enumerate(ratios):
        if isinstance(v, bool) or not isinstance(v, int) or v not in (0, 1, 4, 128):
            r.fail(("compress_ratios", i), f"expected a ratio 0 (window only), 4 or 128, got {_show(v)}")
    return list(ratios)


def _show(v: object) -> str:
    text = repr(v) if isinstance(v, str | int | float | bool) or v is None else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "…"


def refuse_unplanned(arch: ModelArch, dep: Deployment) -> None:
    """What kvplan does not plan yet (one line, exit 2, never a wrong pool): every cache kind is planned on both
    engines; a 4-byte KV cache and per-layer kv heads (DeciLM ``block_configs``) are not, on SGLang."""
    if dep.engine == "sglang" and dep.dtype in ("float", "float32"):  # auto, float16, bfloat16: a 2-byte KV
        raise InputError(f"kvplan does not yet plan --dtype {dep.dtype} (a 4-byte KV cache) on SGLang")
    if dep.engine == "sglang" and len(set(arch.kv_heads_per_layer)) > 1:
        raise InputError(
            f"kvplan does not yet plan per-layer kv heads ({arch.name}: block_configs) on SGLang {dep.engine_version}"
        )

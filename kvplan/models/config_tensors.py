"""``config.json`` -> each tensor's dtype and shape, for the families kvplan models: the checkpoint as the config
implies it, when only the index (or nothing) is downloaded."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from kvplan import limits
from kvplan.errors import ConfigError
from kvplan.models.quant import resolve  # which quantization scheme each module is in
from kvplan.models.safetensors import Tensor

FP8_BLOCK = 128
"""fp8 block quantization: one fp32 ``weight_scale_inv`` per 128 × 128 block of the weight."""


LAID_OUT = frozenset({
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM", "Glm4MoeForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
})  # fmt: skip
"""Architectures :func:`config_tensors` lays out per tensor (any other: None, the parameter groups stand)."""

_GATE_UP_DOWN = ("gate_proj", "up_proj", "down_proj")
_DT = {"bfloat16": "BF16", "bf16": "BF16", "float16": "F16", "fp16": "F16", "half": "F16", "float32": "F32"}


def config_int(config: Mapping[str, Any], key: str, default: int = 0) -> int:
    """An integer field of a config.json (0 .. MAX_DIM; a missing or null key is ``default``), else a ConfigError."""
    v = config.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limits.MAX_DIM:
        raise ConfigError(f"expected an integer 0 .. {limits.MAX_DIM:,}, got {str(v)[:40]}", key=key)
    return v


def _expert_modules(config: Mapping[str, Any], layers: int) -> int:
    """About how many linear modules a per-tensor layout of this config lists: 3 a (routed or shared) expert and
    a dense MLP per layer, MTP layers included. Kimi-K2, the largest real one kvplan reads, lists ~71,000."""
    experts = max(config_int(config, k) for k in ("n_routed_experts", "num_local_experts", "num_experts"))
    shared = max(config_int(config, k) for k in ("n_shared_experts", "num_shared_experts"))
    mtp = config_int(config, "num_nextn_predict_layers")
    return (layers + mtp) * (experts + shared + 1) * 3


def config_tensors(
    config: Mapping[str, Any], source: str = "config.json", *, runs: bool = False
) -> tuple[Tensor, ...] | None:
    """Every tensor a checkpoint of this config holds, with dtype and shape; None for a family or a
    quantization scheme kvplan cannot lay out per tensor (the caller falls back to parameter groups).
    ``runs``: each layer's routed experts that are stored alike as one Tensor per module with a ``count`` (what
    sizing needs: GLM-5.3's 119,028 tensors as 2,748 entries); else each tensor with its own name.

    Families: GQA dense (Llama, Mistral, Qwen2 with q/k/v biases, Qwen3 with q/k norms), GQA MoE (Qwen3-MoE,
    Mixtral), MLA/DSA MoE (DeepSeek-V2/V3/R1, Kimi-K2, GLM-5.x: MTP layers and the indexer included).
    Linear weights in the checkpoint's scheme (quant.resolve): plain dtype, fp8 128×128 blocks
    (``weight_scale_inv`` fp32), fp8 per tensor (``weight_scale`` fp32 scalar), NVFP4 (packed U8 ``weight``,
    fp8 ``weight_scale`` per 16, fp32 ``weight_scale_2`` and ``input_scale``).
    """
    quant = resolve(config, source)
    plain = _DT.get(str(config.get("torch_dtype", config.get("dtype", "bfloat16"))).removeprefix("torch."), "BF16")
    out: list[Tensor] = []
    failed = False

    def add(name: str, *shape: int, dtype: str | None = None, count: int = 1) -> None:
        out.append(Tensor(name, dtype or plain, tuple(shape), count))

    def linear(module: str, n_out: int, n_in: int, *, bias: bool = False, count: int = 1, scheme: Any = None) -> None:
        nonlocal failed
        s = quant.scheme_for(module) if scheme is None else scheme
        vps, wb = s.values_per_scale, s.weight_bits
        if wb in (16, 32) and not vps:
            dtype = {16: plain if plain != "F32" else "BF16", 32: "F32"}[wb]
            add(f"{module}.weight", n_out, n_in, dtype=dtype, count=count)
        elif wb == 8 and vps == FP8_BLOCK * FP8_BLOCK:
            add(f"{module}.weight", n_out, n_in, dtype="F8_E4M3", count=count)
            add(f"{module}.weight_scale_inv", -(-n_out // FP8_BLOCK), -(-n_in // FP8_BLOCK), dtype="F32", count=count)
        elif wb == 8 and not vps:
            add(f"{module}.weight", n_out, n_in, dtype="F8_E4M3", count=count)
            row_bits = getattr(s, "row_bits", 0)  # per-channel: one scale an output row (vLLM keeps it fp32)
            if row_bits:
                add(f"{module}.weight_scale", n_out, 1, dtype="F32" if row_bits == 32 else plain, count=count)
            else:
                add(f"{module}.weight_scale", dtype="F32", count=count)
        elif wb == 4 and vps and s.scale_bits == 8 and "NVFP4" in s.name:
            add(f"{module}.weight", n_out, n_in // 2, dtype="U8", count=count)
            add(f"{module}.weight_scale", n_out, -(-n_in // vps), dtype="F8_E4M3", count=count)
            add(f"{module}.weight_scale_2", dtype="F32", count=count)
            add(f"{module}.input_scale", dtype="F32", count=count)
        else:
            failed = True
        if bias:
            add(f"{module}.bias", n_out, count=count)

    h = config_int(config, "hidden_size")
    layers = config_int(config, "num_hidden_layers")
    vocab = config_int(config, "vocab_size")
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else archs
    if arch is not None and not isinstance(arch, str):  # untrusted: [], a number, a nested list lay out nothing
        return None
    if not h or not layers or not vocab or (arch is not None and arch not in LAID_OUT):
        return None
    if _expert_modules(config, layers) > limits.MAX_CONFIG_MODULES:  # bounded work: parameter groups instead
        return None
    heads = config_int(config, "num_attention_heads")
    tied = bool(config.get("tie_word_embeddings", False))
    add("model.embed_tokens.weight", vocab, h)
    routed = partial(_routed, linear, quant, runs, h)
    if config.get("kv_lora_rank") is not None:
        _mla(config, add, linear, routed, h, layers, heads, vocab)
    else:
        if not _gqa(config, add, linear, routed, h, layers, heads):
            return None
    add("model.norm.weight", h)
    if not tied:
        add("lm_head.weight", vocab, h)
    return None if failed else tuple(out)


def _routed(
    linear: Any, quant: Any, runs: bool, h: int, prefix: str, names: tuple[str, str, str], inter: int, experts: int
) -> None:
    """One layer's routed experts (``prefix`` ends in '.experts.'), gate / up / down each. With ``runs``, each span
    of experts whose modules share their schemes is one entry a tensor (a quantization config can name a single
    expert: each is asked unless one scheme holds for every module)."""
    dims = ((inter, h), (inter, h), (h, inter))
    if not runs:
        for e in range(experts):
            for name, (n_out, n_in) in zip(names, dims, strict=True):
                linear(f"{prefix}{e}.{name}", n_out, n_in)
        return
    spans: list[tuple[int, int, tuple[Any, ...]]] = []
    for e in range(0 if quant.uniform else experts):
        key = tuple(quant.scheme_for(f"{prefix}{e}.{name}") for name in names)
        if spans and spans[-1][2] == key:
            spans[-1] = (spans[-1][0], e + 1, key)
        else:
            spans.append((e, e + 1, key))
    for first, end, key in spans or ([(0, experts, (None, None, None))] if experts else []):
        for name, (n_out, n_in), scheme in zip(names, dims, key, strict=True):
            linear(f"{prefix}{first}.{name}", n_out, n_in, count=end - first, scheme=scheme)


def _gqa(config: Mapping[str, Any], add: Any, linear: Any, routed: Any, h: int, layers: int, heads: int) -> bool:
    kv = config_int(config, "num_key_value_heads", heads)
    hd = config_int(config, "head_dim") or (h // heads if heads else 0)
    inter = config_int(config, "intermediate_size")
    mt = str(config.get("model_type", ""))
    qkv_bias = mt == "qwen2" or bool(config.get("attention_bias", False))
    qk_norm = mt.startswith("qwen3") or bool(config.get("use_qk_norm", False))
    mixtral = config_int(config, "num_local_experts")
    glm = config_int(config, "n_routed_experts")  # GLM-4.5: dense first layers, shared experts, MTP layers
    experts = mixtral or config_int(config, "num_experts") or glm
    moe_inter = inter if mixtral else config_int(config, "moe_intermediate_size")
    step = config_int(config, "decoder_sparse_step", 1) or 1
    only = set(config.get("mlp_only_layers") or ())
    dense = config_int(config, "first_k_dense_replace") if glm else 0
    shared = config_int(config, "n_shared_experts") if glm else 0
    mtp = config_int(config, "num_nextn_predict_layers") if glm else 0
    if not heads or not hd:
        return False
    for i in range(layers + mtp):
        p = f"model.layers.{i}."
        linear(f"{p}self_attn.q_proj", heads * hd, h, bias=qkv_bias)
        linear(f"{p}self_attn.k_proj", kv * hd, h, bias=qkv_bias)
        linear(f"{p}self_attn.v_proj", kv * hd, h, bias=qkv_bias)
        linear(f"{p}self_attn.o_proj", h, heads * hd)
        if qk_norm:
            add(f"{p}self_attn.q_norm.weight", hd)
            add(f"{p}self_attn.k_norm.weight", hd)
        add(f"{p}input_layernorm.weight", h)
        add(f"{p}post_attention_layernorm.weight", h)
        if experts and i >= dense and i not in only and (i + 1) % step == 0:
            moe = "block_sparse_moe" if mixtral else "mlp"
            add(f"{p}{moe}.gate.weight", experts, h)
            if glm:
                add(f"{p}mlp.gate.e_score_correction_bias", experts, dtype="F32")
            routed(f"{p}{moe}.experts.", ("w1", "w3", "w2") if mixtral else _GATE_UP_DOWN, moe_inter, experts)
            if shared:
                linear(f"{p}mlp.shared_experts.gate_proj", moe_inter * shared, h)
                linear(f"{p}mlp.shared_experts.up_proj", moe_inter * shared, h)
                linear(f"{p}mlp.shared_experts.down_proj", h, moe_inter * shared)
        else:
            linear(f"{p}mlp.gate_proj", inter, h)
            linear(f"{p}mlp.up_proj", inter, h)
            linear(f"{p}mlp.down_proj", h, inter)
        if i >= layers:  # GLM-4.5's MTP layer: no embed/head copy of its own (mtp_ships_embed_head)
            add(p + "enorm.weight", h)
            add(p + "hnorm.weight", h)
            add(p + "eh_proj.weight", h, 2 * h)
            add(p + "shared_head.norm.weight", h)
    return True


def mtp_ships_embed_head(config: Mapping[str, Any]) -> bool:
    """Whether each MTP layer of the checkpoint carries its own ``embed_tokens`` and ``shared_head.head``:
    DeepSeek-V3/R1/V3.2 and Kimi-K2 do; GLM-4.5 and GLM-5.x do not (GLM-5-FP8's ``modules_to_not_convert`` names
    every bf16 module of layer 78, eh_proj, enorm, hnorm and shared_head.norm, and no embed or head there; the
    9.96 B-parameter MTP layer of reference section B)."""
    return not str(config.get("model_type", "")).startswith("glm")


def _mla(
    config: Mapping[str, Any], add: Any, linear: Any, routed: Any, h: int, layers: int, heads: int, vocab: int
) -> None:
    q_lora = config_int(config, "q_lora_rank")
    kv_lora = config_int(config, "kv_lora_rank")
    nope = config_int(config, "qk_nope_head_dim", 128)
    rope = config_int(config, "qk_rope_head_dim")
    v = config_int(config, "v_head_dim", 128)
    idx_heads = config_int(config, "index_n_heads")
    idx_dim = config_int(config, "index_head_dim", 128 if config.get("index_topk") else 0)
    dense = config_int(config, "first_k_dense_replace")
    inter = config_int(config, "intermediate_size")
    experts = config_int(config, "n_routed_experts")
    shared = config_int(config, "n_shared_experts")
    moe_inter = config_int(config, "moe_intermediate_size")
    mtp = config_int(config, "num_nextn_predict_layers")
    for i in range(layers + mtp):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        if q_lora:
            linear(a + "q_a_proj", q_lora, h)
            add(a + "q_a_layernorm.weight", q_lora)
            linear(a + "q_b_proj", heads * (nope + rope), q_lora)
        else:
            linear(a + "q_proj", heads * (nope + rope), h)
        linear(a + "kv_a_proj_with_mqa", kv_lora + rope, h)
        add(a + "kv_a_layernorm.weight", kv_lora)
        linear(a + "kv_b_proj", heads * (nope + v), kv_lora)
        linear(a + "o_proj", h, heads * v)
        if idx_heads and idx_dim:
            linear(a + "indexer.wq_b", idx_heads * idx_dim, q_lora or h)
            linear(a + "indexer.wk", idx_dim, h)
            add(a + "indexer.k_norm.weight", idx_dim)
            add(a + "indexer.k_norm.bias", idx_dim)
            add(a + "indexer.weights_proj.weight", idx_heads, h)
        add(p + "input_layernorm.weight", h)
        add(p + "post_attention_layernorm.weight", h)
        if i < dense:
            linear(p + "mlp.gate_proj", inter, h)
            linear(p + "mlp.up_proj", inter, h)
            linear(p + "mlp.down_proj", h, inter)
        else:
            add(p + "mlp.gate.weight", experts, h)
            if config.get("topk_method") == "noaux_tc" or experts:
                add(p + "mlp.gate.e_score_correction_bias", experts, dtype="F32")
            routed(f"{p}mlp.experts.", _GATE_UP_DOWN, moe_inter, experts)
            if shared:
                linear(p + "mlp.shared_experts.gate_proj", moe_inter * shared, h)
                linear(p + "mlp.shared_experts.up_proj", moe_inter * shared, h)
                linear(p + "mlp.shared_experts.down_proj", h, moe_inter * shared)
        if i >= layers:  # the MTP layer's own modules (DeepSeek-V3 checkpoint layout)
            add(p + "enorm.weight", h)
            add(p + "hnorm.weight", h)
            add(p + "eh_proj.weight", h, 2 * h)
            add(p + "shared_head.norm.weight", h)
            if mtp_ships_embed_head(config):
                add(p + "embed_tokens.weight", vocab, h)
                add(p + "shared_head.head.weight", vocab, h)

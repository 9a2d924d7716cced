"""Qwen3-Next's parameters (``Qwen3NextForCausalLM``), as its checkpoint names them, for a weights-per-GPU estimate.

Which layers are full attention: ``layer_types`` when the config lists them, else every
``full_attention_interval``-th (layer i full iff (i + 1) % interval == 0, default 4: transformers
``Qwen3NextConfig.__post_init__``); the others are Gated DeltaNet (GDN). Per layer ``model.layers.{i}.``
(h = hidden_size; nk, dk = linear_num_key_heads, linear_key_head_dim; nv, dv = linear_num_value_heads,
linear_value_head_dim):
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.limits import MAX_LAYERS
from kvplan.models.weights import _factor, _int_set, gqa_heads

if TYPE_CHECKING:
    from kvplan.models.quant import Fields
    from kvplan.models.weights import _Groups

_LINEAR, _FULL = "linear_attention", "full_attention"


def full_attention_layers(c: Fields, layers: int) -> tuple[bool, ...]:
    """Whether each layer is full attention (``layer_types``, else every ``full_attention_interval``-th)."""
    types = c.data.get("layer_types")
    if types is None:
        interval = c.integer("full_attention_interval", 4, maximum=MAX_LAYERS)
        return tuple((i + 1) % interval == 0 for i in range(layers))
    if not isinstance(types, list) or len(types) != layers or any(t not in (_LINEAR, _FULL) for t in types):
        raise c.bad(("layer_types",), f"expected {layers} entries, each {_LINEAR!r} or {_FULL!r}")
    return tuple(t == _FULL for t in types)


def _rotary_factor(c: Fields) -> float:
    """``partial_rotary_factor`` (top level, else under ``rope_parameters``), 0.25 when absent: transformers
    ``Qwen3NextConfig`` sets that default (``kwargs.setdefault("partial_rotary_factor", 0.25)``)."""
    if c.data.get("partial_rotary_factor") is not None:
        return _factor(c, "partial_rotary_factor")
    rope = c.sub("rope_parameters")
    if rope is not None and rope.data.get("partial_rotary_factor") is not None:
        return _factor(rope, "partial_rotary_factor")
    return 0.25


def _vocab_default(c: Fields) -> int:
    """transformers' ``vocab_size`` default, which both engines read through the config object: ``Qwen3NextConfig``
    151,936; ``Qwen3_5TextConfig`` and ``Qwen3_5MoeTextConfig`` 248,320."""
    archs = c.data.get("architectures")
    first = archs[0] if isinstance(archs, list) and archs else archs
    return 248_320 if isinstance(first, str) and first.startswith("Qwen3_5") else 151_936


# The groups, as the checkpoint names them:
#
# - GDN, group ``linear_attention``, split over attention TP: ``linear_attn.in_proj_qkvz`` (2·nk·dk + 2·nv·dv) × h,
#   ``in_proj_ba`` 2·nv × h, ``out_proj`` h × nv·dv (linears, in the scheme their names resolve to); ``conv1d``
#   conv_dim × kernel with conv_dim = 2·nk·dk + nv·dv, ``A_log`` and ``dt_bias`` nv each (checkpoint dtype: both
#   engines build conv1d with ``quant_config=None``). SGLang 0.5.23 ``srt/models/qwen3_next.py``
#   ``Qwen3GatedDeltaNet`` (ColumnParallelLinear / RowParallelLinear on ``attn_tp_size``, conv1d through
#   ``mamba_v2_sharded_weight_loader``, A_log / dt_bias ``num_v_heads // attn_tp_size`` with
#   ``sharded_weight_loader(0)``); vLLM 0.33 ``model_executor/models/qwen3_next.py`` with
#   ``layers/mamba/gdn/qwen_gdn_linear_attn.py`` ``QwenGatedDeltaNetAttention`` (the same shards; in_proj_ba stays
#   TP-sharded for Qwen3-Next's interleaved layout). ``linear_attn.norm`` (RMSNormGated of dv): replicated, ``norms``.
# - gated full attention: ``self_attn.q_proj`` 2·heads·head_dim × h (the query and its output gate:
#   ``attn_output_gate``, default true in both engines: ``QKVParallelLinear(..., total_num_heads *
#   (1 + attn_output_gate), ...)``) and ``o_proj`` h × heads·head_dim, group ``attention``, attention TP;
#   ``k_proj``, ``v_proj`` kv_heads·head_dim × h, group ``kv_proj``, split at most kv_heads ways (both engines:
#   "Number of KV heads is less than TP size, so we replicate the KV heads": Qwen3-Next's 2 kv heads at TP 8 leave
#   each rank one, a quarter of them); ``q_norm``, ``k_norm`` (head_dim): replicated, ``norms``.
# - sparse MoE on layer i iff i is not in ``mlp_only_layers`` and (i + 1) % ``decoder_sparse_step`` == 0 (vLLM
#   ``Qwen3NextDecoderLayer``; SGLang builds every layer sparse, the same for every released config):
#   ``mlp.experts.{e}.{gate,up,down}_proj`` num_experts × 3 × moe_intermediate × h (``routed_experts``, split
#   max(tp, ep)); ``mlp.shared_expert.{gate,up,down}_proj`` 3 × shared_expert_intermediate × h
#   (``shared_experts``, TP: Qwen2MoeMLP); ``mlp.gate`` num_experts × h and ``mlp.shared_expert_gate`` 1 × h
#   (``router``: ReplicatedLinear with ``quant_config=None`` in both engines, replicated); a dense layer:
#   ``mlp.{gate,up,down}_proj`` of ``intermediate_size`` (``dense_mlp``, TP).
# - norms: input and post-attention RMSNorm a layer and the final norm (replicated).
# - embeddings and LM head: vocab × h each (one when tied), vocab parallel; a config without ``vocab_size`` takes
#   transformers' default (``_vocab_default``).
# - MTP, group ``mtp`` (counted only when speculative decoding loads it: SGLang ``load_weights`` skips every name
#   with "mtp" unless ``is_mtp``; vLLM loads ``mtp.*`` in ``Qwen3NextMTP`` only): ``num_nextn_predict_layers``
#   layers, default 1 (vLLM ``qwen3_next_mtp.py``: ``getattr(config, "num_nextn_predict_layers", 1)``; the
#   released config.json has no such key and its checkpoint ships ``mtp.layers.0``): ``mtp.fc`` h × 2h, one
#   full-attention decoder layer with its MoE, ``mtp.pre_fc_norm_embedding``, ``mtp.pre_fc_norm_hidden``,
#   ``mtp.norm``; it shares the embeddings and LM head.
# - the rotary cos/sin cache: max_position_embeddings × int(head_dim × partial_rotary_factor) in the model dtype
#   (both engines: ``get_rope`` with the partial rotary factor), a load-time buffer on every GPU.
#
# Checked against the Qwen/Qwen3-Next-80B-A3B-Instruct checkpoint's tensor listing: 79,674,391,296 parameters in
# the 48 layers, embeddings and head, 1,650,471,424 in ``mtp.*``, 81,324,862,720 in all = the shard index's
# ``metadata.total_size`` 162,649,725,440 B / 2 (tests/models/test_params_qwen3_next.py).
def groups(c: Fields, acc: _Groups) -> str:
    """Every Qwen3-Next module into ``acc`` (see the module docstring); the family label."""
    h = c.required("hidden_size")
    layers = c.required("num_hidden_layers", maximum=MAX_LAYERS)
    heads, kv_heads = gqa_heads(c)
    head_dim = c.required("head_dim")
    nk, dk = c.required("linear_num_key_heads"), c.required("linear_key_head_dim")
    nv, dv = c.required("linear_num_value_heads"), c.required("linear_value_head_dim")
    if nv % nk:
        raise c.bad(("linear_num_value_heads",), f"{nv} value heads are not a multiple of linear_num_key_heads {nk}")
    kernel = c.required("linear_conv_kernel_dim")
    experts = c.integer("num_experts", 0, minimum=0)
    if not experts and c.data.get("intermediate_size") is None:
        return ""  # the config does not describe the MLP: no groups, the loader asks for weights_per_gpu
    moe_inter = c.integer("moe_intermediate_size", 0, minimum=0)
    if experts and not moe_inter:
        raise c.bad(("moe_intermediate_size",), "missing (required for a MoE model)")
    shared_inter = c.integer("shared_expert_intermediate_size", 0, minimum=0)
    inter = c.integer("intermediate_size", 0, minimum=0)
    step = c.integer("decoder_sparse_step", 1)
    only = _int_set(c, "mlp_only_layers")
    gate = 2 if c.flag("attn_output_gate", True) else 1
    mtp = c.integer("num_nextn_predict_layers", 1, minimum=0, maximum=MAX_LAYERS)
    full = full_attention_layers(c, layers)

    def is_moe(i: int) -> bool:
        return bool(experts) and i not in only and (i + 1) % step == 0

    if not all(is_moe(i) for i in range(layers)) and not inter:
        raise c.bad(("intermediate_size",), "missing (required for the dense MLP layers)")

    def attention(p: str, group: str, kv: str, split: str) -> None:
        acc.linear(group, split, f"{p}self_attn.q_proj", gate * heads * head_dim, h)
        acc.linear(group, split, f"{p}self_attn.o_proj", h, heads * head_dim)
        cap = kv_heads if kv == "kv_proj" else 0
        acc.linear(kv, split, f"{p}self_attn.k_proj", kv_heads * head_dim, h, heads=cap)
        acc.linear(kv, split, f"{p}self_attn.v_proj", kv_heads * head_dim, h, heads=cap)

    def moe(p: str, routed: str, shared: str, shared_split: str, router: str, router_split: str) -> None:
        for m, rows, cols in (("gate_proj", moe_inter, h), ("up_proj", moe_inter, h), ("down_proj", h, moe_inter)):
            acc.linear(routed, "experts", f"{p}mlp.experts.0.{m}", rows, cols, count=experts)
        for m, rows, cols in (("gate_proj", shared_inter, h), ("up_proj", shared_inter, h),
                              ("down_proj", h, shared_inter)):  # fmt: skip
            acc.linear(shared, shared_split, f"{p}mlp.shared_expert.{m}", rows, cols)
        acc.plain(router, router_split, experts * h + (h if shared_inter else 0))

    conv_dim = 2 * nk * dk + nv * dv
    norms = h  # the final norm
    for i in range(layers):
        p = f"model.layers.{i}."
        if full[i]:
            attention(p, "attention", "kv_proj", "attn")
            norms += 2 * head_dim  # q_norm, k_norm
        else:
            acc.linear("linear_attention", "attn", f"{p}linear_attn.in_proj_qkvz", 2 * nk * dk + 2 * nv * dv, h)
            acc.linear("linear_attention", "attn", f"{p}linear_attn.in_proj_ba", 2 * nv, h)
            acc.linear("linear_attention", "attn", f"{p}linear_attn.out_proj", h, nv * dv)
            acc.plain("linear_attention", "attn", conv_dim * kernel + 2 * nv)  # conv1d, A_log, dt_bias
            norms += dv  # linear_attn.norm
        if is_moe(i):
            moe(p, "routed_experts", "shared_experts", "tp", "router", "none")
        else:
            for m, rows, cols in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                acc.linear("dense_mlp", "tp", f"{p}mlp.{m}", rows, cols)
        norms += 2 * h  # input_layernorm, post_attention_layernorm
    acc.plain(
        "embeddings",
        "tp",
        c.integer("vocab_size", _vocab_default(c)) * h * (1 if c.flag("tie_word_embeddings", False) else 2),
    )
    acc.plain("norms", "none", norms)
    for k in range(mtp if experts or c.data.get("mtp_num_hidden_layers") else 0):
        p = f"mtp.layers.{k}."
        attention(p, "mtp", "mtp", "experts")
        if experts:
            moe(p, "mtp", "mtp", "experts", "mtp", "experts")
        else:  # Qwen3.5 dense (mtp_num_hidden_layers): the MTP layer's MLP is the dense one (vLLM qwen3_5_mtp.py)
            for m, rows, cols in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                acc.linear("mtp", "experts", f"{p}mlp.{m}", rows, cols)
        # its q/k norms, two layer norms; once: pre_fc_norm_embedding, pre_fc_norm_hidden, mtp.norm
        acc.plain("mtp", "experts", 2 * head_dim + 2 * h + (3 * h if k == 0 else 0))
        if k == 0:
            acc.linear("mtp", "experts", "mtp.fc", h, 2 * h)
    positions = c.integer("max_position_embeddings", 32_768)  # transformers' default (Qwen3Next / Qwen3_5 configs)
    rotary_dim = int(head_dim * _rotary_factor(c))
    acc.buffer("rotary_cache", positions * rotary_dim * acc.quant.plain.bytes_per_param)
    return "hybrid GDN MoE" if experts else "hybrid GDN"

"""DeepSeek-V4 (Flash, Pro) parameter groups, module by module, for weights per GPU.

Shapes and checkpoint names from DeepSeek's reference ``inference/model.py`` (``Attention``, ``Compressor``,
``Indexer``, ``Gate``, ``Expert``, ``Block``, ``MTPBlock``; names as the Hugging Face checkpoint writes them,
``layers.{i}.attn.wq_a`` ... ``mtp.{k}.e_proj``), splits as vLLM 0.33 ``model_executor/models/deepseek_v4.py`` +
``layers/deepseek_v4_attention.py`` + ``layers/deepseek_compressor.py`` shard them (SGLang's
``srt/models/deepseek_v4.py`` ``MQALayer`` the same: ``ReplicatedLinear`` wq_a / wkv, ``ColumnParallelLinear``
wq_b / wo_a, ``RowParallelLinear`` wo_b over the attention TP ranks):
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.limits import MAX_LAYERS, MAX_TOKENS
from kvplan.models.quant import FP32, Scheme

if TYPE_CHECKING:
    from kvplan.models.quant import Fields
    from kvplan.models.weights import _Groups

INT32 = Scheme(name="int32", weight_bits=32)
"""The hash-routing table ``tid2eid`` (``torch.int32`` in ``Gate``)."""


# The groups, module by module:
#
# | group                | per layer (h hidden, H heads × d head_dim, q q_lora, r o_lora, g o_groups)     | split  |
# |----------------------|--------------------------------------------------------------------------------|--------|
# | attention            | wq_b (H·d × q), wo_a (g·r × H·d/g), wo_b (h × g·r); attn_sink (H, fp32)       | attn   |
# | attention_replicated | wq_a (q × h), wkv (d × h) (``fused_wqa_wkv``, ``disable_tp``); q_norm, kv_norm | none   |
# | compressor           | ratio 4 / 128 layers: wkv, wgate (c·d × h, c = 2 for ratio 4 else 1, bf16:     | none   |
# |                      | ``quant_config=None``), ape (ratio × c·d, fp32), norm (d)                      |        |
# | indexer              | ratio 4 layers: wq_b (I·e × q), weights_proj (I × h, bf16), its own compressor | none   |
# |                      | (c = 2, head e = index_head_dim); k_norm is vLLM's, not the checkpoint's       |        |
# | hyper_connections    | hc_attn / hc_ffn: fn ((2 + m)·m × m·h), base ((2 + m)·m), scale (3), fp32;     | none   |
# |                      | the head's hc_head fn (m × m·h), base (m), scale (1)                           |        |
# | norms                | attn_norm, ffn_norm (h) a layer, the final norm                                | none   |
# | router               | gate.weight (E × h); gate.bias (E, fp32) with ``noaux_tc``, or on the first    | none   |
# |                      | ``num_hash_layers`` layers tid2eid (vocab × top-k, int32) instead of the bias  |        |
# | routed_experts       | E × (w1, w3: f × h; w2: h × f), MXFP4 when ``expert_dtype`` is fp4 (quant.py)  | experts|
# | shared_experts       | n_shared × (w1, w3, w2), fp8 blocks                                           | tp     |
# | embeddings           | embed, head (vocab × h; one copy when tied)                                    | tp     |
# | mtp                  | each MTP block: a full layer (its ``compress_ratios`` entry: 0 on both         | experts|
# |                      | checkpoints, so no compressor), e_proj / h_proj (h × h), enorm, hnorm, norm,   |        |
# |                      | its hc_head; embed and head are the model's (``MTPBlock.embed = None``)        |        |
#
# Linears are fp8 e4m3 in 128×128 blocks (the config's ``quantization_config``); the checkpoint stores those
# scales as ue8m0 (1 B) where kvplan counts fp32 (4 B): 3 B per 16,384 values, under 0.02 % of the bytes.
# Not counted here: the engines' load-time buffers (vLLM's ``topk_indices_buffer`` and ``_mtp_hidden_buffer`` depend
# on max_num_batched_tokens and are added on vLLM by kvplan.engines.vllm_dsv4_memory; SGLang's per-rope
# ``freqs_cis``), SGLang's bf16 ``wo_a`` when ``SGLANG_OPT_FP8_WO_A_GEMM`` is off, and vLLM's attn_sink padding to
# 64 heads a rank.
def groups(c: Fields, acc: _Groups) -> str:
    """Every DeepSeek-V4 tensor of the checkpoint into ``acc``; returns the family label."""
    h = c.required("hidden_size")
    layers = c.required("num_hidden_layers", maximum=MAX_LAYERS)
    mtp = c.integer("num_nextn_predict_layers", 0, minimum=0, maximum=MAX_LAYERS)
    heads = c.required("num_attention_heads")
    head_dim = c.required("head_dim")
    q_lora = c.required("q_lora_rank")
    o_lora = c.required("o_lora_rank")
    o_groups = c.required("o_groups")
    if heads % o_groups:
        raise c.bad(("o_groups",), f"{o_groups} output groups do not divide {heads} attention heads")
    index_heads = c.integer("index_n_heads", 0, minimum=0)
    index_dim = c.integer("index_head_dim", 128)
    experts = c.required("n_routed_experts")
    shared = c.integer("n_shared_experts", 0, minimum=0)
    ffn = c.required("moe_intermediate_size")
    top_k = c.required("num_experts_per_tok")
    hash_layers = c.integer("num_hash_layers", 0, minimum=0, maximum=MAX_LAYERS)
    hc = c.integer("hc_mult", 1)
    vocab = c.required("vocab_size")
    bias = c.text("topk_method", "") == "noaux_tc"
    ratios = _ratios(c, layers + mtp)

    mix = (2 + hc) * hc

    def norm(group: str, split: str, size: int) -> None:
        acc.plain(group, split, size)

    def compressor(group: str, ratio: int, dim: int) -> None:
        coff = 2 if ratio == 4 else 1  # ratio 4 overlaps two windows (``overlap``)
        acc.plain(group, "none", 2 * coff * dim * h)  # wkv, wgate: bf16 linears (quant_config=None)
        acc.plain(group, "none", ratio * coff * dim, scheme=FP32)  # ape
        norm(group, "none", dim)

    def block(i: int, p: str, *, mtp_block: bool) -> None:
        a = "mtp" if mtp_block else "attention"
        ar = "mtp" if mtp_block else "attention_replicated"
        asplit, rsplit = ("experts", "experts") if mtp_block else ("attn", "none")
        acc.linear(a, asplit, f"{p}attn.wq_b", heads * head_dim, q_lora)
        acc.linear(a, asplit, f"{p}attn.wo_a", o_groups * o_lora, heads * head_dim // o_groups)
        acc.linear(a, asplit, f"{p}attn.wo_b", h, o_groups * o_lora)
        acc.plain(a, asplit, heads, scheme=FP32)  # attn_sink
        acc.linear(ar, rsplit, f"{p}attn.wq_a", q_lora, h)
        acc.linear(ar, rsplit, f"{p}attn.wkv", head_dim, h)
        norm(ar, rsplit, q_lora + head_dim)  # q_norm, kv_norm
        ratio = ratios[i]
        if ratio:
            compressor("mtp" if mtp_block else "compressor", ratio, head_dim)
        if ratio == 4 and index_heads:
            g = "mtp" if mtp_block else "indexer"
            acc.linear(g, "none", f"{p}attn.indexer.wq_b", index_heads * index_dim, q_lora)
            acc.plain(g, "none", index_heads * h)  # weights_proj, bf16
            compressor(g, ratio, index_dim)
        hcg = "mtp" if mtp_block else "hyper_connections"
        acc.plain(hcg, "none", 2 * (mix * hc * h + mix + 3), scheme=FP32)  # hc_attn_*, hc_ffn_*
        norm("mtp" if mtp_block else "norms", "none", 2 * h)  # attn_norm, ffn_norm
        r = "mtp" if mtp_block else "router"
        acc.plain(r, "none", experts * h)  # gate.weight
        if i < hash_layers:
            acc.plain(r, "none", vocab * top_k, scheme=INT32)  # gate.tid2eid
        elif bias:
            acc.plain(r, "none", experts, scheme=FP32)  # gate.bias
        routed = "mtp" if mtp_block else "routed_experts"
        shr, shr_split = ("mtp", "experts") if mtp_block else ("shared_experts", "tp")
        for m, rows, cols in (("w1", ffn, h), ("w3", ffn, h), ("w2", h, ffn)):
            acc.linear(routed, "experts", f"{p}ffn.experts.0.{m}", rows, cols, count=experts)
            acc.linear(shr, shr_split, f"{p}ffn.shared_experts.{m}", rows, cols, count=shared)

    for i in range(layers):
        block(i, f"layers.{i}.", mtp_block=False)
    tied = c.flag("tie_word_embeddings", False)
    acc.plain("embeddings", "tp", vocab * h * (1 if tied else 2))  # embed, head
    norm("norms", "none", h)  # the final norm
    acc.plain("hyper_connections", "none", hc * hc * h + hc + 1, scheme=FP32)  # hc_head_fn / base / scale
    for k in range(mtp):
        p = f"mtp.{k}."
        block(layers + k, p, mtp_block=True)
        acc.linear("mtp", "experts", f"{p}e_proj", h, h)
        acc.linear("mtp", "experts", f"{p}h_proj", h, h)
        norm("mtp", "experts", 3 * h)  # enorm, hnorm, norm
        acc.plain("mtp", "experts", hc * hc * h + hc + 1, scheme=FP32)  # its hc_head
    return "DeepSeek-V4 compressed attention MoE"


def _ratios(c: Fields, count: int) -> tuple[int, ...]:
    """``compress_ratios`` for the decoder and MTP layers (0 where the list stops: no compressor)."""
    v = c.data.get("compress_ratios")
    if not isinstance(v, list) or not v:
        raise c.bad(("compress_ratios",), "expected a list of compress ratios (0, 4 or 128), one per layer")
    for i, x in enumerate(v[:count]):
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_TOKENS:
            raise c.bad(("compress_ratios", i), f"expected a ratio (0 for the window only), got {x!r:.40}")
    return tuple((x if x > 1 else 0) for x in v[:count]) + (0,) * max(count - len(v), 0)

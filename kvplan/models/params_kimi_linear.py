"""Parameter groups of Kimi-Linear (``KimiLinearForCausalLM``) and Kimi-K3's text model, by checkpoint name.

Read from the fields the engines read (SGLang 0.5.23 ``srt/models/kimi_linear.py`` and ``srt/models/kimi_k3.py``,
vLLM 0.33 ``model_executor/models/kimi_linear.py`` with ``layers/kda.py``); Kimi-K3 is the same decoder with
five optional parts its ``text_config`` switches on, each counted only when its field is there.

Layer by layer: which layers are KDA at ``_kda_layers``; each group's checkpoint names and shapes, and what is not
counted (Kimi-K3's vision tower), at ``groups``. Module names are the checkpoint's (``model.layers.N.``; Kimi-K3's
raw checkpoint prefixes them ``language_model.``, which its ``re:`` ignore patterns match either way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.limits import MAX_LAYERS

if TYPE_CHECKING:
    from kvplan.models.quant import Fields
    from kvplan.models.weights import _Groups


# Layer ``i`` (0-based) is KDA iff ``i + 1`` is in ``linear_attn_config.kda_layers`` (SGLang
# ``KimiLinearConfig.is_kda_layer``), else MLA.
def _kda_layers(c: Fields, layers: int) -> frozenset[int]:
    """0-based indices of the KDA layers: ``linear_attn_config.kda_layers`` is 1-based."""
    la = c.sub("linear_attn_config")
    raw = la.data.get("kda_layers") if la is not None else None
    if la is None or not isinstance(raw, list):
        raise c.bad((*c.path, "linear_attn_config", "kda_layers"), "expected a list of layer numbers (1-based)")
    for i, v in enumerate(raw[:MAX_LAYERS]):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= layers:
            raise c.bad((*la.path, "kda_layers", i), f"expected a layer number from 1 to {layers}, got {v!r:.40}")
    return frozenset(v - 1 for v in raw)


# H = ``linear_attn_config.num_heads``, d = ``head_dim``, P = H × d, k = ``short_conv_kernel_size``,
# h = ``hidden_size``:
# - KDA (group ``linear_attention``, attention TP, at most H ways): ``self_attn.q_proj``, ``k_proj``, ``v_proj``
#   (P × h each, column parallel), ``b_proj`` (H × h), ``f_b_proj`` (P × d), ``g_b_proj`` (P × d; K3's
#   ``use_full_rank_gate``: ``g_proj`` P × h instead of ``g_a_proj`` + ``g_b_proj``), ``o_proj`` (h × P, row
#   parallel), ``q_conv1d``/``k_conv1d``/``v_conv1d`` (P × k each), ``dt_bias`` (P), ``A_log`` (H); the engines hold
#   the conv weights, ``dt_bias`` and ``A_log`` in fp32 (``params_dtype=torch.float32``), counted here in the
#   checkpoint dtype (under 0.01 % of the weights). Replicated on every rank (group ``replicated_attention``):
#   ``f_a_proj`` and ``g_a_proj`` (d × h each, ``ReplicatedLinear`` in both engines).
# - MLA (group ``attention``, attention TP, at most ``num_attention_heads`` ways; n heads, nope + rope q/k dims,
#   v dims, kv_lora r): ``q_proj`` n·(nope + rope) × h, or with ``q_lora_rank`` q (K3) ``q_b_proj`` n·(nope + rope)
#   × q; ``kv_b_proj`` n·(nope + v) × r; ``o_proj`` h × n·v; K3's ``mla_use_output_gate``: ``g_proj`` n·v × h
#   (``KimiK3MLAAttention``: ``ColumnParallelLinear`` over attention TP). Replicated: ``kv_a_proj_with_mqa``
#   (r + rope) × h and ``q_a_proj`` q × h (SGLang fuses both into the replicated ``fused_qkv_a_proj_with_mqa``;
#   vLLM ``ReplicatedLinear``). Neither engine builds a rotary cache for these layers (SGLang ``skip_rope=True``,
#   vLLM ``rotary_emb=None``: Kimi's MLA is NoPE).
# - MLP: layers before ``first_k_dense_replace`` (and off the ``moe_layer_freq`` cadence) a dense ``mlp.gate_proj``,
#   ``up_proj`` (``intermediate_size`` × h) and ``down_proj`` (``dense_mlp``, TP); the others
#   ``block_sparse_moe``: ``num_experts`` routed experts ``experts.E.w1``/``w3`` (``moe_intermediate_size`` × m)
#   and ``w2`` (m × ``moe_intermediate_size``) with m = h, or K3's latent width ``routed_expert_hidden_size``
#   (``routed_experts``, experts split); ``shared_experts.gate_proj``/``up_proj``/``down_proj`` of
#   ``moe_intermediate_size`` × ``num_shared_experts`` (``shared_experts``, TP: SGLang/vLLM ``KimiMLP`` with
#   ``intermediate_size = moe_intermediate_size * num_shared_experts``); the router ``gate`` (``num_experts`` × h
#   + the ``e_score_correction_bias``, ``router``, replicated, never quantized). K3's latent MoE
#   (``KimiK3MoE``): ``routed_expert_down_proj`` m × h and ``routed_expert_up_proj`` h × m, ``ReplicatedLinear``
#   with ``quant_config=None`` (bf16 whatever the checkpoint's scheme), and the latent RMSNorm when
#   ``latent_moe_use_norm`` (group ``latent_moe``, replicated).
# - ``embed_tokens`` and ``lm_head``: vocab × h each (``embeddings``, vocab parallel; one copy when tied).
# - ``norms`` (replicated): input and post-attention RMSNorm per layer and the final one, ``kv_a_layernorm`` (r)
#   and ``q_a_layernorm`` (q) per MLA layer, KDA ``o_norm`` (d); K3's attention residuals
#   (``attn_res_block_size``, ``KimiK3DecoderLayer``): two RMSNorms (h) and two ``ReplicatedLinear`` h → 1
#   (``self_attention_res_proj``, ``mlp_res_proj``) a layer, plus ``output_attn_res_norm`` and
#   ``output_attn_res_proj`` once.
# Not counted: Kimi-K3's vision tower and ``mm_projector`` (the preset and the config.json path plan the text model,
# as vLLM's ``--language-model-only`` serves it). From ``vision_config`` and SGLang ``kimi_k3_vl.py`` they would add
# 447,358,976 parameters: patch conv 3 × 1,024 × 14 × 14 = 602,112, position table 64 × 64 × 1,024 = 4,194,304,
# 27 layers × (``wqkv`` 4,608 × 1,024 + ``wo`` 1,024 × 1,536 + ``fc0``/``fc1`` 2 × 4,096 × 1,024 + 2 norms × 1,024)
# = 396,417,024, the final norm 1,024, the projector 4,096² + 7,168 × 4,096 + 7,168 = 46,144,512 (bias-free, bf16:
# the ignore list keeps ``vision_tower``/``mm_projector`` unquantized): 0.83 GiB on every rank where the tower runs
# replicated (SGLang ``use_data_parallel = True``), under 0.5 % of K3's 190.97 GiB a GPU at tp 8.
def groups(c: Fields, acc: _Groups) -> str:
    """Add every Kimi-Linear / Kimi-K3 text-model module to ``acc``; the family label."""
    h = c.required("hidden_size")
    layers = c.required("num_hidden_layers", maximum=MAX_LAYERS)
    kda = _kda_layers(c, layers)
    la = c.sub("linear_attn_config")
    assert la is not None  # _kda_layers read it
    kda_heads, d = la.required("num_heads"), la.required("head_dim")
    kernel = la.required("short_conv_kernel_size")  # both engines subscript linear_attn_config for it: no default
    full_rank_gate = la.flag("use_full_rank_gate", False)
    proj = kda_heads * d

    heads = c.required("num_attention_heads")
    # the engines build q_a_proj where `q_lora_rank is not None` (vLLM DeepseekV2Attention): 0 is a rank-0
    # projection there, not "no q_lora": refused, as num_experts 0 below
    q_lora = c.integer("q_lora_rank", 0, minimum=1)
    kv_lora = c.required("kv_lora_rank")
    # required: KimiLinearConfig (vLLM / SGLang configs/kimi_linear.py) defaults all three to None
    nope, rope = c.required("qk_nope_head_dim"), c.required("qk_rope_head_dim", minimum=0)
    v_dim = c.required("v_head_dim")
    output_gate = c.flag("mla_use_output_gate", False)

    # KimiLinearConfig.is_moe is `num_experts is not None` and KimiK3MoE's latent `routed_expert_hidden_size is not
    # None` (SGLang configs/kimi_linear.py, models/kimi_k3.py): a 0 there builds a MoE of no experts or of width 0,
    # which no engine serves, so 0 is refused rather than read as "none"
    experts = c.integer("num_experts", 0)
    shared = c.integer("num_shared_experts", 0, minimum=0)
    moe_inter = c.integer("moe_intermediate_size", 0, minimum=0)
    inter = c.integer("intermediate_size", 0, minimum=0)
    dense_first = c.integer("first_k_dense_replace", 0, minimum=0)
    freq = c.integer("moe_layer_freq", 1)
    latent = c.integer("routed_expert_hidden_size", 0)
    latent_norm = c.flag("latent_moe_use_norm", False)
    attn_res = c.integer("attn_res_block_size", 0)  # vLLM KimiLinearModel: cdiv(end_layer, block size) when not None
    vocab = c.integer("vocab_size", 163_840)  # KimiLinearConfig(vocab_size=163840), vLLM and SGLang alike
    if not experts and c.data.get("intermediate_size") is None:
        return ""  # the config does not describe the MLP: no groups, the loader asks for weights_per_gpu
    if experts and not moe_inter:
        raise c.bad((*c.path, "moe_intermediate_size"), "missing (required for a MoE model)")

    def is_moe(i: int) -> bool:  # KimiDecoderLayer._is_layer_sparse
        return bool(experts) and i >= dense_first and i % freq == 0

    if not inter and not all(is_moe(i) for i in range(layers)):
        raise c.bad((*c.path, "intermediate_size"), "missing (required for the dense MLP layers)")
    m = latent or h
    norm_params = h  # the final norm
    for i in range(layers):
        p = f"model.layers.{i}."
        a = f"{p}self_attn."
        norm_params += 2 * h + (2 * h if attn_res else 0)
        if attn_res:
            acc.plain("norms", "none", 2 * h)  # self_attention_res_proj, mlp_res_proj: h -> 1 each
        if i in kda:
            for name in ("q_proj", "k_proj", "v_proj"):
                acc.linear("linear_attention", "attn", a + name, proj, h, heads=kda_heads)
            acc.linear("linear_attention", "attn", a + "b_proj", kda_heads, h, heads=kda_heads)
            acc.linear("linear_attention", "attn", a + "f_b_proj", proj, d, heads=kda_heads)
            acc.linear("replicated_attention", "none", a + "f_a_proj", d, h)
            if full_rank_gate:
                acc.linear("linear_attention", "attn", a + "g_proj", proj, h, heads=kda_heads)
            else:
                acc.linear("linear_attention", "attn", a + "g_b_proj", proj, d, heads=kda_heads)
                acc.linear("replicated_attention", "none", a + "g_a_proj", d, h)
            acc.linear("linear_attention", "attn", a + "o_proj", h, proj, heads=kda_heads)
            # q/k/v_conv1d (P × kernel each), dt_bias (P), A_log (H): sharded by head like the projections
            acc.plain("linear_attention", "attn", 3 * proj * kernel + proj + kda_heads, heads=kda_heads)
            norm_params += d  # o_norm
        else:
            if q_lora:
                acc.linear("replicated_attention", "none", a + "q_a_proj", q_lora, h)
                acc.linear("attention", "attn", a + "q_b_proj", heads * (nope + rope), q_lora, heads=heads)
                norm_params += q_lora  # q_a_layernorm
            else:
                acc.linear("attention", "attn", a + "q_proj", heads * (nope + rope), h, heads=heads)
            acc.linear("replicated_attention", "none", a + "kv_a_proj_with_mqa", kv_lora + rope, h)
            acc.linear("attention", "attn", a + "kv_b_proj", heads * (nope + v_dim), kv_lora, heads=heads)
            acc.linear("attention", "attn", a + "o_proj", h, heads * v_dim, heads=heads)
            if output_gate:
                acc.linear("attention", "attn", a + "g_proj", heads * v_dim, h, heads=heads)
            norm_params += kv_lora  # kv_a_layernorm
        if is_moe(i):
            moe = f"{p}block_sparse_moe."
            for name, rows, cols in (("w1", moe_inter, m), ("w3", moe_inter, m), ("w2", m, moe_inter)):
                acc.linear("routed_experts", "experts", f"{moe}experts.0.{name}", rows, cols, count=experts)
            s = moe_inter * shared
            for name, rows, cols in (("gate_proj", s, h), ("up_proj", s, h), ("down_proj", h, s)):
                acc.linear("shared_experts", "tp", f"{moe}shared_experts.{name}", rows, cols)
            acc.plain("router", "none", experts * h + experts)  # gate.weight + e_score_correction_bias
            if latent:
                # routed_expert_down_proj (m × h), routed_expert_up_proj (h × m), the latent norm (m)
                acc.plain("latent_moe", "none", 2 * m * h + (m if latent_norm else 0))
        else:
            for name, rows, cols in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                acc.linear("dense_mlp", "tp", f"{p}mlp.{name}", rows, cols)
    acc.plain("embeddings", "tp", vocab * h * (1 if c.flag("tie_word_embeddings", False) else 2))
    if attn_res:
        norm_params += 2 * h  # output_attn_res_norm (h) and output_attn_res_proj (h -> 1)
    acc.plain("norms", "none", norm_params)
    return "hybrid KDA + MLA MoE" if experts else "hybrid KDA + MLA"

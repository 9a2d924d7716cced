"""GLM-5.3-Flash's parameters (``Glm5NextForConditionalGeneration``, ``glm5_next``), as its checkpoint names them.

``c`` holds the decoder's ``text_config`` fields (kvplan.models.hybrid passes them with the outer config's
``architectures``, ``quantization_config`` and ``vision_config``). Which layers are KDA (Kimi Delta Attention)
linear attention: ``linear_attn_config.kda_layers`` (0-based), else the ``layer_types`` entries
"linear_attention", else every layer with ``i % 4 != 3`` (SGLang 0.5.23 ``srt/configs/glm5_next.py``
``Glm5NextTextConfig``); the others are MLA with the pooled DSA indexer. Module names are the checkpoint's,
``model.language_model.layers.{i}.`` (SGLang maps ``model.language_model.`` to ``model.``), so a
``quantization_config`` list resolves on them. h = hidden_size; n, d = the KDA ``num_heads``, ``head_dim``
(p = n·d); heads, nope, v, q_lora, kv_lora the MLA fields; ih, id the indexer's ``index_n_heads``,
``index_head_dim``. Splits as SGLang 0.5.23 ``srt/models/glm5_next.py`` builds them (vLLM 0.33
``models/glm5next/`` shards the same way: FlashML-org/FreeToken#507 describes the same split):
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.limits import MAX_LAYERS
from kvplan.models.quant import FP32

if TYPE_CHECKING:
    from kvplan.models.quant import Fields
    from kvplan.models.weights import _Groups

PREFIX = "model.language_model."
"""The checkpoint's prefix of the decoder's tensors (SGLang ``hf_to_sglang_mapper``: ``model.language_model.``)."""


def kda_layers(c: Fields, layers: int) -> tuple[bool, ...]:
    """Whether each layer is KDA: ``linear_attn_config.kda_layers`` (0-based), else ``layer_types``, else
    ``i % 4 != 3`` (SGLang ``Glm5NextTextConfig.__init__`` / ``is_kda_layer``)."""
    la = c.sub("linear_attn_config")
    if la is not None and la.data.get("kda_layers") is not None:
        kda = la.data["kda_layers"]
        if not isinstance(kda, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in kda
        ):
            raise c.bad((*la.path, "kda_layers"), f"expected a list of layer numbers from 0 to {layers - 1}")
        return tuple(i in set(kda) for i in range(layers))
    types = c.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or any(not isinstance(t, str) for t in types):
            raise c.bad((*c.path, "layer_types"), f"expected {layers} layer type names")
        return tuple(t == "linear_attention" for t in types)
    return tuple(i % 4 != 3 for i in range(layers))


# The groups, as the checkpoint names them:
#
# - KDA, per layer (``Glm5NextLinearAttention``), group ``linear_attention``, attention TP (``attn_tp_size``, whole
#   heads a rank): ``self_attn.q_proj``, ``k_proj``, ``v_proj`` p × h each (``QKVParallelLinear``), ``b_proj`` n × h,
#   ``f_b_proj``, ``g_b_proj`` p × d (``ColumnParallelLinear``), ``o_proj`` h × p (``RowParallelLinear``); the
#   ``q/k/v_conv1d`` weights 3·p × kernel, ``A_log`` n and ``dt_bias`` p (sharded by head, checkpoint dtype).
#   ``f_a_proj`` and ``g_a_proj`` d × h are ``ReplicatedLinear``: group ``linear_attention_replicated``, 'none'.
#   ``o_norm`` (d): ``norms``.
# - MLA, per full layer (``DeepseekV2AttentionMLA`` with ``qk_rope_head_dim`` 0): ``q_b_proj`` heads·(nope+rope) ×
#   q_lora, ``kv_b_proj`` heads·(nope+v) × kv_lora, ``o_proj`` h × heads·v: group ``attention``, attention TP;
#   ``q_a_proj`` q_lora × h and ``kv_a_proj_with_mqa`` (kv_lora+rope) × h are replicated (SGLang fuses them into
#   ``fused_qkv_a_proj_with_mqa``, a ``ReplicatedLinear``): group ``attention_latent``, 'none', with
#   ``q_a_layernorm`` and ``kv_a_layernorm``.
# - the pooled indexer (``IndexerKPool``, ``srt/layers/attention/nsa/dsa_indexer_kpool.py``), on every full layer,
#   all ``ReplicatedLinear``, group ``indexer``, 'none': ``self_attn.indexer.wq_b`` ih·id × q_lora, ``wk`` id × h,
#   ``weights_proj`` ih × h; ``index_kpool_compress_gate`` id × h (bf16), ``index_kpool_compress_ape``
#   index_kpool × id, ``k_norm`` (LayerNorm weight and bias, 2·id).
# - mHC (``mhc: true``, ``hc_mult`` m): per layer ``hc_attn_fn`` and ``hc_ffn_fn`` (2+m)·m × m·h,
#   ``hc_{attn,ffn}_base`` (2+m)·m, ``hc_{attn,ffn}_scale`` 3: group ``mhc``, replicated.
# - MLP: ``first_k_dense_replace`` dense layers ``mlp.{gate,up,down}_proj`` of ``intermediate_size``
#   (``dense_mlp``, TP); the others ``mlp.experts.{e}.*`` n_routed × 3 × moe_intermediate × h (``routed_experts``,
#   max(tp, ep)), ``mlp.shared_experts.*`` (``shared_experts``, TP), ``mlp.gate`` n_routed × h and its
#   ``e_score_correction_bias`` n_routed (``router``, replicated).
# - norms: input and post-attention RMSNorm a layer, the final norm; embeddings and LM head vocab × h each (one when
#   tied), vocab parallel.
# - MTP (``num_nextn_predict_layers``, layer ``num_hidden_layers + k``): one MLA + indexer decoder layer with its MoE,
#   ``eh_proj`` h × 2h, ``enorm``, ``hnorm``, ``shared_head.norm``: group ``mtp`` (loaded only with speculative
#   decoding).
# - the vision tower (``vision_config``; skipped by SGLang with ``language_only``): group ``vision``, TP
#   (``VisionAttention`` with ``use_qkv_parallel``, its MLP column / row parallel): ``depth`` blocks of qkv 3·vh × vh
#   (+ bias), proj vh × vh (+ bias), q/k norms (vh / heads each), two norms, ``gate_up_proj`` 2·vi × vh and
#   ``down_proj`` vh × vi (+ biases; the checkpoint stores ``gate_proj`` and ``up_proj``); the Conv3d patch
#   embedding vh × 3·t·p² (+ bias), the post layernorm, the Conv2d downsample vo × vh·s² (+ bias), the merger's
#   ``proj`` vo × vo, its LayerNorm (2·vo) and its MLP of ``projection_intermediate_size`` (no biases).
#
# fp32 tensors (counted at 4 B): the mHC mixes (``F32`` in the checkpoint's tensor listing), ``A_log``, ``dt_bias`` and
# the conv weights (SGLang builds them fp32), ``e_score_correction_bias``, the compress ape. Not counted (not in the
# engines' model files above): the MTP layer's own mHC parameters and any model-level mHC head; the element count
# below says there are none.
#
# Checked against the FP8 checkpoint's 62 shard headers as patrickbdevaney/glm-5.3-reap recorded them
# (``stages/s00_smoke.py``: 321,342,220,638 tensor elements in all, 311,672,586,240 of them the routed experts'
# weights and block scales): tests/models/test_params_glm5_next.py.
def groups(c: Fields, acc: _Groups) -> str:
    """Every GLM-5.3-Flash module into ``acc`` (see the module docstring); the family label."""
    h = c.required("hidden_size")
    layers = c.required("num_hidden_layers", maximum=MAX_LAYERS)
    la = c.sub("linear_attn_config")
    n = la.integer("num_heads", 0) if la is not None else 0
    n = n or c.integer("linear_num_heads", 64)
    d = la.integer("head_dim", 0) if la is not None else 0
    d = d or c.integer("linear_head_dim", 128)
    kernel = la.integer("short_conv_kernel_size", 0) if la is not None else 0
    kernel = kernel or c.integer("linear_conv_kernel_dim", 4)
    p = n * d
    heads = c.required("num_attention_heads")
    # q_lora_rank 1536 when the config names none: SGLang 0.5.23 Glm5NextTextConfig(q_lora_rank=1536) and vLLM
    # 0.33.0's transformers (5.16.1-5.20) Glm5NextTextConfig.q_lora_rank = 1536; an explicit null is SGLang's
    # q_proj path (Optional[int]: `if self.q_lora_rank is not None`), which transformers refuses for DSA
    q_lora = (
        0 if "q_lora_rank" in c.data and c.data["q_lora_rank"] is None else c.integer("q_lora_rank", 1536, minimum=0)
    )
    kv_lora = c.integer("kv_lora_rank", 512)
    nope, rope = c.integer("qk_nope_head_dim", 256), c.integer("qk_rope_head_dim", 0, minimum=0)
    v = c.integer("v_head_dim", 256)
    # Glm5NextTextConfig(index_n_heads=None): the indexer needs it, read beside index_topk only (at least 1)
    ih = c.required("index_n_heads") if c.data.get("index_topk") is not None else 0
    idim, kpool = c.integer("index_head_dim", 128), c.integer("index_kpool", 1)
    experts = c.integer("n_routed_experts", 0, minimum=0)
    moe_inter = c.integer("moe_intermediate_size", 0, minimum=0)
    if experts and not moe_inter:
        raise c.bad((*c.path, "moe_intermediate_size"), "missing (required for a MoE model)")
    # Glm5NextTextConfig defaults n_shared_experts to 1; an explicit null builds none (`is None`: no shared_experts)
    null = "n_shared_experts" in c.data and c.data["n_shared_experts"] is None
    shared = 0 if null else c.integer("n_shared_experts", 1, minimum=0)
    inter = c.integer("intermediate_size", 0, minimum=0)
    dense_first = c.integer("first_k_dense_replace", 0, minimum=0, maximum=MAX_LAYERS)
    if (dense_first or not experts) and not inter:
        raise c.bad((*c.path, "intermediate_size"), "missing (required for the dense MLP layers)")
    hc = c.integer("hc_mult", 4) if c.flag("mhc", False) else 0
    mtp = c.integer("num_nextn_predict_layers", 1, minimum=0, maximum=MAX_LAYERS)  # Glm5NextTextConfig: 1
    kda = kda_layers(c, layers)

    def mla(pre: str, group: str, latent: str, indexer: str, split: str, rep: str) -> int:
        """The MLA attention and its indexer; returns the norm parameters (q_a / kv_a layernorms)."""
        a = f"{pre}self_attn."
        if q_lora:
            acc.linear(latent, rep, f"{a}q_a_proj", q_lora, h)
            acc.linear(group, split, f"{a}q_b_proj", heads * (nope + rope), q_lora)
        else:
            acc.linear(group, split, f"{a}q_proj", heads * (nope + rope), h)
        acc.linear(latent, rep, f"{a}kv_a_proj_with_mqa", kv_lora + rope, h)
        acc.linear(group, split, f"{a}kv_b_proj", heads * (nope + v), kv_lora)
        acc.linear(group, split, f"{a}o_proj", h, heads * v)
        if ih:
            acc.linear(indexer, rep, f"{a}indexer.wq_b", ih * idim, q_lora or h)
            acc.linear(indexer, rep, f"{a}indexer.wk", idim, h)
            acc.linear(indexer, rep, f"{a}indexer.weights_proj", ih, h)
            acc.plain(indexer, rep, idim * h + 2 * idim)  # index_kpool_compress_gate (bf16), k_norm weight, bias
            acc.plain(indexer, rep, kpool * idim if kpool > 1 else 0, scheme=FP32)  # index_kpool_compress_ape
        return q_lora + kv_lora

    def moe(pre: str, routed: str, shr: str, shr_split: str, router: str, router_split: str) -> None:
        mlp = (("gate_proj", moe_inter, h), ("up_proj", moe_inter, h), ("down_proj", h, moe_inter))
        for m, rows, cols in mlp:
            acc.linear(routed, "experts", f"{pre}mlp.experts.0.{m}", rows, cols, count=experts)
            acc.linear(shr, shr_split, f"{pre}mlp.shared_experts.{m}", rows, cols, count=shared)
        acc.plain(router, router_split, experts * h)  # mlp.gate.weight
        acc.plain(router, router_split, experts, scheme=FP32)  # mlp.gate.e_score_correction_bias

    norms = h  # the final norm
    mhc = 2 * ((2 + hc) * hc * hc * h + (2 + hc) * hc + 3) if hc else 0
    for i in range(layers):
        pre = f"{PREFIX}layers.{i}."
        a = f"{pre}self_attn."
        if kda[i]:
            for m, rows, cols in (("q_proj", p, h), ("k_proj", p, h), ("v_proj", p, h), ("b_proj", n, h),
                                  ("f_b_proj", p, d), ("g_b_proj", p, d), ("o_proj", h, p)):  # fmt: skip
                acc.linear("linear_attention", "attn", f"{a}{m}", rows, cols, heads=n)
            # q/k/v_conv1d, A_log, dt_bias
            acc.plain("linear_attention", "attn", 3 * p * kernel + n + p, heads=n, scheme=FP32)
            acc.linear("linear_attention_replicated", "none", f"{a}f_a_proj", d, h)
            acc.linear("linear_attention_replicated", "none", f"{a}g_a_proj", d, h)
            norms += d  # o_norm
        else:
            norms += mla(pre, "attention", "attention_latent", "indexer", "attn", "none")
        if mhc:
            acc.plain("mhc", "none", mhc, scheme=FP32)
        if experts and i >= dense_first:
            moe(pre, "routed_experts", "shared_experts", "tp", "router", "none")
        else:
            for m, rows, cols in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                acc.linear("dense_mlp", "tp", f"{pre}mlp.{m}", rows, cols)
        norms += 2 * h  # input_layernorm, post_attention_layernorm
    # Glm5NextTextConfig(vocab_size=154880) in SGLang and vLLM alike: a config without it still has embeddings
    vocab = c.integer("vocab_size", 154_880, minimum=0)
    acc.plain("embeddings", "tp", vocab * h * (1 if c.flag("tie_word_embeddings", False) else 2))
    acc.plain("norms", "none", norms)
    for k in range(mtp if experts else 0):
        pre = f"{PREFIX}layers.{layers + k}."
        extra = mla(pre, "mtp", "mtp", "mtp", "experts", "experts")
        moe(pre, "mtp", "mtp", "experts", "mtp", "experts")
        acc.linear("mtp", "experts", f"{pre}eh_proj", h, 2 * h)
        acc.plain("mtp", "experts", extra + 5 * h)  # its layernorms, enorm, hnorm, shared_head.norm
    _vision(c, acc)
    return "hybrid KDA + DSA MoE" if experts else "hybrid KDA + DSA"


def _vision(c: Fields, acc: _Groups) -> None:
    """The vision tower (``Glm5NextVisionModel``, a GlmOcr vision model): group ``vision``, TP."""
    vc = c.sub("vision_config")
    if vc is None or c.flag("language_only", False):
        return
    vh, vi = vc.required("hidden_size"), vc.required("intermediate_size")
    vo = vc.required("out_hidden_size")
    pi = vc.integer("projection_intermediate_size", vi)
    vheads = vc.required("num_heads")
    depth = vc.required("depth", maximum=MAX_LAYERS)
    patch, t, s = vc.required("patch_size"), vc.integer("temporal_patch_size", 2), vc.integer("spatial_merge_size", 2)
    bias = vc.flag("attention_bias", True)
    v = "model.visual."
    for b in range(depth):
        pre = f"{v}blocks.{b}."
        acc.linear("vision", "tp", f"{pre}attn.qkv", 3 * vh, vh)
        acc.linear("vision", "tp", f"{pre}attn.proj", vh, vh)
        acc.linear("vision", "tp", f"{pre}mlp.gate_proj", vi, vh)
        acc.linear("vision", "tp", f"{pre}mlp.up_proj", vi, vh)
        acc.linear("vision", "tp", f"{pre}mlp.down_proj", vh, vi)
        # qkv and proj biases (attention_bias), the MLP's biases, q/k norms, norm1, norm2
        acc.plain("vision", "tp", (4 * vh if bias else 0) + 2 * vi + vh + 2 * (vh // vheads) + 2 * vh)
    acc.plain("vision", "tp", vh * vc.integer("in_channels", 3) * t * patch * patch + vh)  # patch_embed (Conv3d)
    acc.plain("vision", "tp", vh + vo * vh * s * s + vo)  # post_layernorm, downsample (Conv2d) and its bias
    acc.linear("vision", "tp", f"{v}merger.proj", vo, vo)
    acc.linear("vision", "tp", f"{v}merger.gate_proj", pi, vo)
    acc.linear("vision", "tp", f"{v}merger.up_proj", pi, vo)
    acc.linear("vision", "tp", f"{v}merger.down_proj", vo, pi)
    acc.plain("vision", "tp", 2 * vo)  # merger.post_projection_norm (LayerNorm)

"""Parameter groups of gpt-oss (``GptOssForCausalLM``), by checkpoint name.

Read from vLLM ``model_executor/models/gpt_oss.py`` (``OAIAttention``, ``MLPBlock``, ``GptOssModel``) and the
checkpoint's own names (openai/gpt-oss-120b ``model.safetensors.index.json``); the groups are listed above
``groups``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan import record
from kvplan.limits import MAX_LAYERS
from kvplan.models.additions import rotary_cache_bytes
from kvplan.models.mxfp4_moe import Mxfp4Experts
from kvplan.models.quant import method_of
from kvplan.models.weights import BufferGroup, gqa_heads


@record(kw_only=True)
class Fp32RotaryCache(BufferGroup):
    """gpt-oss's cos/sin cache: float32 whatever the model dtype (``OAIAttention``: ``get_rope(dtype=float32)``)."""

    bytes_per_param_num: int = 0
    """A buffer of no parameters (its bytes are ``buffer_bytes``)."""

    def in_dtype(self, stored: int, loaded: int) -> Fp32RotaryCache:
        return self


if TYPE_CHECKING:
    from kvplan.models.quant import Fields
    from kvplan.models.weights import _Groups


# The groups, as the checkpoint names them:
#
# - attention (attention TP): ``self_attn.q_proj`` (heads·d × h) and ``o_proj`` (h × heads·d) with their biases,
#   ``sinks`` (one bf16 a head: ``OAIAttention.sinks``); ``k_proj`` / ``v_proj`` (kv·d × h, biased) at most kv-heads
#   ways (``QKVParallelLinear`` replicates past them);
# - ``mlp.router`` (E × h + E bias, ``torch.nn.Linear``: whole on every rank);
# - ``mlp.experts``: E experts of ``gate_up_proj`` (2·I × h) and ``down_proj`` (h × I) with biases. With
#   ``quant_method: mxfp4`` they are :class:`kvplan.models.mxfp4_moe.Mxfp4Experts` (what each backend holds);
#   otherwise linears in the checkpoint dtype;
# - two RMSNorms (h);
#
# plus ``embed_tokens`` and ``lm_head`` (vocab × h each, vocab parallel), the final norm, and the rotary cos/sin
# cache: ``get_rope(..., dtype=torch.float32)`` with yarn, original × factor positions × head_dim × 4 B on every rank.
# ``modules_to_not_convert`` keeps attention, router, embeddings and head in bf16.
def groups(c: Fields, acc: _Groups) -> str:
    h = c.required("hidden_size")
    layers = c.required("num_hidden_layers", maximum=MAX_LAYERS)
    heads, kv_heads = gqa_heads(c)
    d = c.integer("head_dim", h // heads)
    experts = c.required("num_local_experts")
    inter = c.required("intermediate_size")
    vocab = c.integer("vocab_size", 0, minimum=0)
    for i in range(layers):
        p = f"model.layers.{i}.self_attn."
        acc.linear("attention", "attn", f"{p}q_proj", heads * d, h)
        acc.linear("attention", "attn", f"{p}o_proj", h, heads * d)
        acc.plain("attention", "attn", heads * d + heads)  # q bias, sinks (o bias: replicated, below)
        acc.linear("kv_proj", "attn", f"{p}k_proj", kv_heads * d, h, heads=kv_heads)
        acc.linear("kv_proj", "attn", f"{p}v_proj", kv_heads * d, h, heads=kv_heads)
        acc.plain("kv_proj", "attn", 2 * kv_heads * d, heads=kv_heads)
    acc.plain("router", "none", layers * (experts * h + experts))
    acc.plain("norms", "none", (2 * layers + 1) * h + layers * h)  # 2 RMSNorms a layer + final; o_proj biases
    acc.plain("embeddings", "tp", vocab * h * (1 if c.flag("tie_word_embeddings", False) else 2))
    if method_of(c.data) == "mxfp4":  # the one reading of quantization_config (kvplan.models.quant)
        acc.extra(
            Mxfp4Experts(
                name="routed_experts",
                params=layers * experts * (3 * h * inter + 2 * inter + h),
                bytes_per_param_num=1,
                split="experts",
                gemm="fp4",  # MXFP4 blocks (its bytes_per_param is a placeholder: layout_bytes counts them)
                experts=experts,
                hidden=h,
                intermediate=inter,
                moe_layers=layers,
            )
        )
    else:
        for i in range(layers):
            p = f"model.layers.{i}.mlp.experts."
            acc.linear("routed_experts", "experts", f"{p}gate_up_proj", 2 * inter, h, count=experts)
            acc.linear("routed_experts", "experts", f"{p}down_proj", h, inter, count=experts)
            acc.plain("routed_experts", "experts", experts * (2 * inter + h))
    rope = rotary_cache_bytes(dict(c.data, torch_dtype="float32"))  # OAIAttention: get_rope(dtype=float32)
    acc.extra(Fp32RotaryCache(name="rotary_cache", params=0, buffer_bytes=rope, split="none"))
    return "GQA MoE"

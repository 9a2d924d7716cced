"""Grok-1 / Grok-2's parameters (``Grok1ForCausalLM``), for a weights-per-GPU estimate.

Read from SGLang ``models/grok.py`` (``Grok1DecoderLayer``, ``Grok1MoE``, ``Grok1MLP``). Per layer (h = hidden_size,
d = ``head_dim``, default 128 as ``Grok1Attention`` reads it): q and o (heads·d × h, attention TP), k and v
(kv·d × h, at most kv-heads ways), no biases; ``num_local_experts`` experts of w1 / w3 (I × h) and w2, I =
``moe_intermediate_size`` else ``intermediate_size``, and their gate E × h (replicated); with ``residual_moe``
(Grok-2) a dense MLP of ``intermediate_size`` beside them (tensor parallel); four RMSNorms. Plus embed_tokens and
lm_head (vocab × h each: grok.py loads its own ``ParallelLMHead``; one copy in a tied checkpoint, where SGLang still
allocates the head and vLLM shares the embedding: ``SglangLmHead``), the final norm and the rotary cos/sin cache.
xai-org/grok-2's published total, 269,515,497,472 parameters, is these counts exactly (tests/models/test_grok2.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.limits import MAX_LAYERS
from kvplan.models.arch import ParamGroup, Split
from kvplan.models.weights import gqa_heads

if TYPE_CHECKING:
    from kvplan.models.quant import Fields
    from kvplan.models.weights import _Groups


def groups(c: Fields, acc: _Groups) -> str:
    h = c.required("hidden_size")
    layers = c.required("num_hidden_layers", maximum=MAX_LAYERS)
    heads, kv_heads = gqa_heads(c)
    d = c.integer("head_dim", 128)  # Grok1Attention: getattr(config, "head_dim", 128)
    experts = c.required("num_local_experts")
    inter = c.required("intermediate_size")
    expert_inter = c.integer("moe_intermediate_size", inter)  # grok.py: moe_intermediate_size, else intermediate
    residual = c.flag("residual_moe", False)
    vocab = c.required("vocab_size")  # Grok1Model: VocabParallelEmbedding(config.vocab_size, ...), no default
    for i in range(layers):
        p = f"model.layers.{i}."
        acc.linear("attention", "attn", f"{p}self_attn.q_proj", heads * d, h)
        acc.linear("attention", "attn", f"{p}self_attn.o_proj", h, heads * d)
        acc.linear("kv_proj", "attn", f"{p}self_attn.k_proj", kv_heads * d, h, heads=kv_heads)
        acc.linear("kv_proj", "attn", f"{p}self_attn.v_proj", kv_heads * d, h, heads=kv_heads)
        for m, rows, cols in (("w1", expert_inter, h), ("w3", expert_inter, h), ("w2", h, expert_inter)):
            acc.linear("routed_experts", "experts", f"{p}block_sparse_moe.experts.0.{m}", rows, cols, count=experts)
        if residual:
            for m, rows, cols in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                acc.linear("dense_mlp", "tp", f"{p}mlp.{m}", rows, cols)
    acc.plain("router", "none", layers * experts * h)
    acc.plain("norms", "none", (4 * layers + 1) * h)  # four RMSNorms a layer + the final one
    tied = c.flag("tie_word_embeddings", False)
    acc.plain("embeddings", "tp", vocab * h * (1 if tied else 2))
    if tied:  # one matrix in the checkpoint and on vLLM; SGLang still allocates its own LM head
        per = acc.quant.plain.bytes_per_param  # the checkpoint dtype, as the embeddings
        acc.extra(SglangLmHead(name="lm_head", params=0, bytes_per_param_num=per.numerator,
                               bytes_per_param_den=per.denominator, head_params=vocab * h))  # fmt: skip
    acc.span(range(layers), "attention", "kv_proj", "routed_experts", "router", *(("dense_mlp",) if residual else ()))
    positions = c.required("max_position_embeddings")  # Grok1DecoderLayer: config.max_position_embeddings
    acc.buffer("rotary_cache", positions * d * acc.quant.plain.bytes_per_param)  # get_rope: rotary_dim = head_dim
    return "GQA MoE"


@dataclass(frozen=True, kw_only=True)
class SglangLmHead(ParamGroup):
    """A tied Grok config's LM head on SGLang: ``Grok1ForCausalLM`` builds its own ``ParallelLMHead(vocab_size,
    hidden_size)`` whatever ``tie_word_embeddings`` says (SGLang 0.5.23 ``models/grok.py``), vocab parallel, while
    vLLM's ``grok1.py`` points ``lm_head.weight`` at ``embed_tokens.weight`` (one copy). No parameters of the
    checkpoint: ``head_params`` (vocab × hidden) at the checkpoint dtype's bytes per parameter."""

    head_params: int

    def bytes_per_gpu(self, split: Split) -> int:
        return 0

    def bytes_on(self, split: Split, *, engine: str | None, with_mtp: bool, moe_backend: str | None = None) -> int:
        if engine != "sglang":
            return 0
        total = self.head_params * self.bytes_per_param_num
        return -(-total // (self.bytes_per_param_den * split.ways("tp")))

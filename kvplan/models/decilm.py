"""DeciLM / Nemotron-NAS configs (``DeciLMForCausalLM``): kv heads chosen layer by layer in ``block_configs``.

vLLM ``model_executor/models/nemotron_nas.py`` (``DeciLMDecoderLayer``): a layer's attention has
``num_attention_heads // block_configs[i].attention.n_heads_in_group`` kv heads; a layer whose attention is
``no_op`` or ``replace_with_linear`` builds no Attention, so it has no KV cache. Layers of different kv heads give
FullAttentionSpecs of different page sizes, one ``UniformTypeKVCacheSpecs`` group (``v1/core/kv_cache_utils.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan import limits

if TYPE_CHECKING:
    from kvplan.models.reader import Reader


NOT_COUNTED: tuple[str, ...] = (
    "the parameters of a DeciLM config without intermediate_size (MLP widths per block, ffn_mult) are not counted"
    " yet: give weights_per_gpu to plan with it",
)


def kv_heads_per_layer(r: Reader, num_layers: int, heads: int) -> tuple[int, ...]:
    """Each layer's kv heads from ``block_configs`` (0 where the layer has no attention cache)."""
    if not r.has("block_configs"):
        r.fail("block_configs", "missing (required): DeciLM gives each layer's attention in block_configs")
    blocks = r.data["block_configs"]
    if not isinstance(blocks, list) or len(blocks) != num_layers:
        size = len(blocks) if isinstance(blocks, list) else "no"
        r.fail("block_configs", f"expected a list of {num_layers} layer configs, got {size} entries")
    out = []
    for i in range(num_layers):
        if not isinstance(blocks[i], dict) or not isinstance(blocks[i].get("attention"), dict):
            r.fail(("block_configs", i), "expected a mapping with an 'attention' mapping")
        att = type(r)(r.doc, (*r.path, "block_configs", i, "attention"), blocks[i]["attention"])
        if att.get_bool("no_op") or att.get_bool("replace_with_linear"):
            out.append(0)
            continue
        if att.has("window_length"):
            att.fail("window_length", "a DeciLM sliding window is not modelled yet")
        group = att.get_int("n_heads_in_group", required=True, maximum=limits.MAX_DIM)
        if heads % group:
            att.fail("n_heads_in_group", f"{group} does not divide num_attention_heads {heads}")
        out.append(heads // group)
    if not any(out):
        r.fail("block_configs", "no layer has attention: no KV cache to plan")
    return tuple(out)
